"""Producer registry: ``register_producer``, ``maybe_fused_act_quant``, ``fused_act_quant``.

One table per backend maps (activation type, consumer QuantKey) to a producer
and an optional support predicate ``(x, scale) -> (ok, reason)``. Registration
never looks at the hardware; the current backend is consulted at lookup. A
producer receives validated input and returns ``(q, scale)``; wrapping into a
``QuantizedActivation`` happens here, once for every backend.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Callable, NamedTuple, Optional

import torch

from fused_quant import activations, envs, runtime, selection
from fused_quant.selection import current_backend_name
from fused_quant import keys as K
from fused_quant import platforms as _platforms
from fused_quant.tracing import graph_constant
from fused_quant.contract import QuantizedActivation, get_input_quant_key
from fused_quant.numerics import NumericsProfile, get_profile
from fused_quant.validation import (
    BackendUnavailableError,
    ProducerError,
    ScaleError,
    UnsupportedError,
    check_activation,
    check_activation_input,
    check_backend_names,
    check_predicate_answer,
    check_scale_tensor,
    check_takes,
    described,
    needing_grad,
)

logger = logging.getLogger("fused_quant")

ProducerFn = Callable[..., "tuple[torch.Tensor, torch.Tensor]"]
SupportFn = Callable[[torch.Tensor, Optional[torch.Tensor]], "tuple[bool, str]"]
# bind(x, scale, *, numerics, fp8_dtype) -> a callable (x, scale) -> (q, scale) valid for every input
# with x's and scale's metadata (dtype, shape, strides, device), or None
BindFn = Callable[..., "Callable[[torch.Tensor, Optional[torch.Tensor]], tuple[torch.Tensor, torch.Tensor]] | None"]


class Producer(NamedTuple):
    act: str
    act_type: type
    key: K.QuantKey
    backend: str
    fn: ProducerFn  # fn(x, scale, *, numerics: NumericsProfile, fp8_dtype) -> (q, scale)
    supported: SupportFn | None = None
    bind: BindFn | None = None  # optional: fn's work resolved once per input signature
    replaced: "Producer | None" = None  # the producer registered before it with replace=True (unregister_producer)

    def check(self, x: torch.Tensor, scale: torch.Tensor | None) -> tuple[bool, str]:
        if self.supported is None:
            return True, ""
        return check_predicate_answer(self.supported(x, scale), lambda: f"producer {self.label}")

    @property
    def label(self) -> str:
        return f"{getattr(self.fn, '__qualname__', self.fn)!s} ({self.backend}: {self.act} -> {K.key_name(self.key)})"

    def check_outputs(self, x: torch.Tensor, out: object, fp8_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """What a producer returned: ``(q, scale)`` with q of the key's storage dtype and the activation's
        output shape, a float32 scale of the key's granularity, both on x's device."""
        if not (type(out) is tuple and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
            got = type(out).__name__ if type(out) is not tuple else f"({', '.join(type(t).__name__ for t in out)})"
            raise ProducerError(f"producer {self.label} must return a (q, scale) pair of tensors, got {got}")
        q, s = out
        want_shape = (*x.shape[:-1], activations.out_features(self.act, x.shape[-1]))
        want_dtype = K.storage_dtype(self.key, fp8_dtype)
        problems = []
        if q.dtype != want_dtype or tuple(q.shape) != want_shape:
            problems.append(f"q must be {want_dtype} {want_shape}, got {q.dtype} {tuple(q.shape)}")
        elif not q.is_contiguous():  # a GEMM takes [M, K] rows as they lie in memory
            problems.append(f"q must be contiguous, got strides {q.stride()}")
        want_s = (*want_shape[:-1], 1) if K.is_per_token(self.key) else None
        if s.dtype != torch.float32 or (tuple(s.shape) != want_s if want_s else s.numel() != 1):
            problems.append(f"scale must be float32 {want_s or 'with one element'}, got {s.dtype} {tuple(s.shape)}")
        if q.device != x.device or s.device != x.device:
            problems.append(f"outputs must be on {x.device}, got {q.device} and {s.device}")
        if problems:
            raise ProducerError(f"producer {self.label}: " + "; ".join(problems))
        return out


# backend -> (activation name, key name) -> producer. String keys keep lookups cheap and
# traceable by torch.compile. Every backend's table is there from the start; a change (under
# ``runtime.changing()``) puts a changed copy of one in place, so a call reading them without a lock never sees
# a table change size or half changed.
_PRODUCERS: dict[str, dict[tuple[str, str], Producer]] = {name: {} for name in selection.BACKENDS}
_SCALE_WHAT = {name: f"scale for {name}" for name in K.KEYS}
_COUNTS: Counter = Counter()


def act_types() -> dict[str, type]:
    """Activation name -> module type (``silu_and_mul``, ``relu2``, ``identity``)."""
    return {a.name: a.module_type for a in activations.ACTIVATIONS.values()}


_act_name_or_none = activations.name_of_type
# the activation modules' own types: a set lookup where a call without a quantized consumer checks its arguments
_ACTIVATION_TYPES = frozenset(a.module_type for a in activations.ACTIVATIONS.values())
# what a refusal of swapped arguments says
_ARGUMENT_ORDER = "the arguments are (act_fn, x, consumer), and linear_act_quant's (linear, x, act_fn, consumer)"


def _act_name(act_type: type) -> str:
    name = _act_name_or_none(act_type)
    if name is not None:
        return name
    raise UnsupportedError(
        f"{act_type.__name__} is not a known activation; expected one of "
        f"{', '.join(t.__name__ for t in act_types().values())}"
    )


def _debug(msg: str, *args) -> None:
    if not torch.compiler.is_compiling():
        logger.debug(msg, *args)


def register_producer(act_type: type, key: K.QuantKey, *, backend: str, supported: SupportFn | None = None,
                      bind: BindFn | None = None, replace: bool = False) -> Callable[[ProducerFn], ProducerFn]:
    """Decorator: register ``fn(x, scale, *, numerics, fp8_dtype) -> (q, scale)`` for a backend.

    ``bind(x, scale, *, numerics, fp8_dtype)``, optional, returns a callable ``(x, scale) -> (q, scale)``
    that does ``fn``'s work for every input with the same metadata as ``x`` and ``scale`` (or None):
    the registry then runs the checks once per call signature and afterwards calls it directly
    (launch-bound sizes). A producer with ``bind`` must have a ``supported`` that reads metadata only.

    A backend has one producer per activation and key, and an activation is its kind (a subclass of
    ``SiluAndMul`` that keeps its forward is silu_and_mul): where the backend has one already (the torch
    backend's are the reference every backend falls back to), registering another raises unless
    ``replace=True``; ``unregister_producer`` then puts the replaced one back.
    """
    who = "register_producer"
    key = _check_slot(act_type, key, backend, who)
    if not isinstance(replace, bool):
        raise TypeError(f"{who}: replace must be True or False, got {replace!r}")
    for what, f in (("supported", supported), ("bind", bind)):
        if f is not None and not callable(f):
            raise TypeError(f"{who}: {what} must be callable or None, got {type(f).__name__}")

    def deco(fn: ProducerFn) -> ProducerFn:
        if not callable(fn):
            raise TypeError(f"{who}: the producer must be callable, got {type(fn).__name__}")
        for what, f in (("the producer", fn), ("bind", bind)):
            check_takes(f, f"{who}: {what}", "(x, scale, *, numerics, fp8_dtype)", None, None, numerics=None,
                        fp8_dtype=None)
        check_takes(supported, f"{who}: supported", "(x, scale)", None, None)
        act = _act_name(act_type)
        slot = (act, K.key_name(key))
        with runtime.changing():
            table = _PRODUCERS.get(backend, {})
            old = table.get(slot)
            if old is not None and (old.fn, old.supported, old.bind) == (fn, supported, bind):
                return fn  # the same producer again (a plugin registering twice): nothing to replace
            if old is not None and not replace:
                raise ProducerError(f"{who}: backend {backend} has a producer for {act} -> {slot[1]} already "
                                    f"({old.label}); pass replace=True to replace it (unregister_producer puts it "
                                    "back)")
            _PRODUCERS[backend] = {**table, slot: Producer(act, act_type, key, backend, fn, supported, bind, old)}
            runtime.reset()  # validated calls and backend choices may route differently now
        return fn

    return deco


def _check_slot(act_type: object, key: object, backend: object, who: str) -> K.QuantKey:
    """``register_producer``'s and ``unregister_producer``'s (activation class, key, backend), checked: the key."""
    if not isinstance(act_type, type):
        raise TypeError(f"{who}: act_type must be an activation module class "
                        f"({', '.join(t.__name__ for t in act_types().values())}), got {type(act_type).__name__}")
    key = K.as_key(key, f"{who}: key")
    if not isinstance(backend, str):  # a producer belongs to one backend's table
        raise TypeError(f"{who}: backend must be one backend's name ({', '.join(selection.BACKENDS)}), got "
                        f"{backend!r}; a producer is registered once per backend")
    check_backend_names((backend,), f"{who}: backend", selection.BACKENDS)
    return key


def unregister_producer(act_type: type, key: K.QuantKey, *, backend: str) -> None:
    """Take out ``backend``'s producer for (``act_type``'s activation, ``key``): the one it replaced
    (``register_producer(..., replace=True)``) serves again, where there was one. No such producer raises."""
    key = _check_slot(act_type, key, backend, "unregister_producer")
    act, name = _act_name(act_type), K.key_name(key)
    with runtime.changing():
        table = dict(_PRODUCERS.get(backend, {}))
        old = table.get((act, name))
        if old is None:
            raise ProducerError(f"unregister_producer: backend {backend!r} has no producer for {act} -> {name}")
        if old.replaced is None and backend == selection.FALLBACK:
            raise ProducerError(f"unregister_producer: the {backend} backend's producer for {act} -> {name} is the "
                                "reference every backend falls back to; register_producer(..., replace=True) "
                                "replaces it")
        if old.replaced is not None:
            table[(act, name)] = old.replaced
        else:
            del table[(act, name)]
        _PRODUCERS[backend] = table
        runtime.reset()


def producers(backend: str | None = None) -> list[Producer]:
    """Registered producers, of one backend or all, in registration order."""
    names = [backend] if backend else list(_PRODUCERS)
    return [p for name in names for p in _PRODUCERS.get(name, {}).values()]


def lookup(act_type: type, key: K.QuantKey, backend: str) -> Producer | None:
    act, name = _act_name_or_none(act_type), K.key_name_or_none(key)
    if act is None or name is None:  # an activation or key nobody produces: the caller falls back
        return None
    return _lookup_names(act, name, backend)


def _lookup_names(act: str, key_name: str, backend: str) -> Producer | None:
    return _PRODUCERS.get(backend, {}).get((act, key_name))


def fusion_counts() -> dict[tuple[str, str, str], int]:
    """How many times each (backend, activation, key name) producer ran in this process (an eager
    ``QuantLinear`` whose GEMM quantizes its plain-tensor input itself runs no producer)."""
    return dict(_COUNTS)


def reset_fusion_counts() -> None:
    """Set every ``fusion_counts`` entry back to none (e.g. before the one forward whose producers to count)."""
    _COUNTS.clear()


# Values fixed for the life of a process: under torch.compile they become graph constants
# instead of traced probing, locking and env reads.
@graph_constant
def platform_fp8_dtype() -> torch.dtype:
    """The node's concrete FP8 dtype (e4m3fn where the platform has none: torch emulates it)."""
    return _platforms.current_platform().fp8_dtype or K.FP8_DTYPE


@graph_constant
def platform_has_fp8() -> bool:
    return _platforms.current_platform().has_fp8


@graph_constant
def platform_label() -> str:
    info = _platforms.current_platform()
    return info.arch or info.vendor


@graph_constant
def _env_numerics() -> str:
    """FUSED_QUANT_NUMERICS, read once per runtime state (a change takes effect after ``reset()``)."""
    return runtime.once("env_numerics", envs.numerics)


class _BoundCall:
    """A validated call, for every input with the same metadata: the producer bound to it. Its first
    output is checked against the producer's contract (``Producer.check_outputs``), later ones are not."""

    __slots__ = ("fn", "count", "key", "pin", "orig_dtype", "producer", "unchecked")

    def __init__(self, fn: Callable, producer: Producer, pin: object, orig_dtype: torch.dtype):
        self.fn = fn  # (x, scale) -> (q, scale)
        self.count = (producer.backend, producer.act, K.key_name(producer.key))
        self.key = producer.key  # carried by its output
        self.pin = pin  # the caller's key object: kept alive, so its id in the call signature stays its own
        self.orig_dtype = orig_dtype
        self.producer, self.unchecked = producer, True

    def tensors(self, x: torch.Tensor, scale: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q, scale)`` without the ``QuantizedActivation`` (a consumer that uses them at once)."""
        out = self.fn(x, scale)
        if self.unchecked:
            self.producer.check_outputs(x, out, platform_fp8_dtype())
            self.unchecked = False
        _COUNTS[self.count] += 1
        return out

    def __call__(self, x: torch.Tensor, scale: torch.Tensor | None) -> QuantizedActivation:
        return self.wrap(*self.tensors(x, scale))

    def wrap(self, q: torch.Tensor, s: torch.Tensor) -> QuantizedActivation:
        """This producer's ``(q, scale)`` as its ``QuantizedActivation`` (by position: keywords cost a call a third
        more host time)."""
        return QuantizedActivation(q, s, self.orig_dtype, q.shape, self.key)

    def counted(self) -> None:
        """Count one call of this producer that another kernel ran for it (``fusion_counts``)."""
        _COUNTS[self.count] += 1


# Calls whose checks passed, by signature: (form, activation, id of the key, numerics, backend, and the
# metadata of the input and scale tensors). Every check of a producer call reads metadata only, so a
# call with the same signature passes them again and goes straight to its bound producer.
_CALLS = runtime.Cache("calls")
_STRIDED = torch.strided


def _checked_call(form: str, act: object, key: object, numerics: object, backend: object, x: object,
                  scale: object) -> tuple[tuple | None, _BoundCall | None]:
    """(filing, call): ``call`` is the bound call of an earlier call with this signature; on a miss
    ``filing`` is (signature, the runtime generation now), what ``_run`` files this call under once
    its checks pass. Neither under torch.compile (Dynamo traces the checks), for an activation given
    by neither its name nor a module, or when an argument is not a plain tensor or cannot be hashed:
    the full checks run and name what is wrong."""
    if (torch.compiler.is_compiling() or type(x) is not torch.Tensor or act is None or x.requires_grad
            or x.layout is not _STRIDED):  # a sparse COO tensor's strides are a dense expanded one's
        return None, None
    if scale is not None and (type(scale) is not torch.Tensor or scale.requires_grad or scale.layout is not _STRIDED):
        return None, None
    try:
        s = None if scale is None else (scale.dtype, scale.shape, scale.device)
        sig = (form, act, id(key), numerics, backend, x.dtype, x.shape, x.stride(), x.device, s)
        call = _CALLS.get(sig)
    except (TypeError, RuntimeError):  # an unhashable numerics or backend argument; a nested x's or scale's sizes
        return None, None
    return (None if call is not None else (sig, runtime.generation())), call


def _bind(prod: Producer, x: torch.Tensor, scale: torch.Tensor | None, profile: NumericsProfile,
          sig: tuple, pin: object) -> _BoundCall | None:
    """File a checked call under its signature (``_checked_call``'s filing) when the producer has ``bind``."""
    if prod.bind is None:
        return None
    bound = prod.bind(x, scale, numerics=profile, fp8_dtype=platform_fp8_dtype())
    if bound is None:
        return None
    call = _BoundCall(bound, prod, pin, x.dtype)
    signature, generation = sig
    return _CALLS.put(signature, call, generation)  # dropped if a reset came since it was checked


def _run(prod: Producer, x: torch.Tensor, scale: torch.Tensor | None, profile: NumericsProfile,
         sig: tuple | None = None, pin: object = None) -> QuantizedActivation:
    """Run a checked call; with ``sig`` (``_checked_call``'s filing) and a producer with ``bind``, file
    it so that the next call with its signature skips the checks."""
    call = _bind(prod, x, scale, profile, sig, pin) if sig is not None else None
    if call is not None:
        return call(x, scale)
    fp8_dtype = platform_fp8_dtype()
    q, s = prod.check_outputs(x, prod.fn(x, scale, numerics=profile, fp8_dtype=fp8_dtype), fp8_dtype)
    if not torch.compiler.is_compiling():
        _COUNTS[(prod.backend, prod.act, K.key_name(prod.key))] += 1
    return QuantizedActivation(q, s, x.dtype, q.shape, prod.key)


def _static_scale(linear: torch.nn.Module, key: K.QuantKey) -> torch.Tensor | None:
    return getattr(linear, "input_scale", None) if K.is_static(key) else None


def _scale_problem(key: K.QuantKey, scale: object, x: torch.Tensor) -> str:
    if not K.is_static(key):
        return ""
    try:
        check_scale_tensor(scale, device=x.device)
    except (TypeError, ValueError) as exc:
        return f"consumer's static input scale is unusable: {exc}"
    return ""


def maybe_fused_act_quant(act_fn: torch.nn.Module, x: torch.Tensor, linear: torch.nn.Module | None,
                          *, numerics: str | NumericsProfile | None = None) -> torch.Tensor | QuantizedActivation:
    """``QuantizedActivation`` when a producer for (type(act_fn), linear's key) accepts ``x``: the current
    backend's, or where it has none or declines ``x``, the torch backend's (``_producer_for``); otherwise
    ``act_fn(x)``. Model code calls it unconditionally. An ``act_fn`` with forward hooks or a ``forward`` of its
    own (``activations.hooked``) runs as called: a producer would skip them."""
    key = get_input_quant_key(linear)
    if key is None:
        if type(linear) in _ACTIVATION_TYPES:  # an activation as the consumer: the arguments swapped
            raise TypeError(f"maybe_fused_act_quant: the consumer is an activation ({type(linear).__name__}), "
                            f"act_fn a {type(act_fn).__name__}; {_ARGUMENT_ORDER}")
        _check_act_fn(act_fn)
        if numerics is not None:  # a profile that does not exist is refused where nothing is fused too
            get_profile(numerics)
        return act_fn(x)
    if activations.hooked(act_fn) and get_input_quant_key(act_fn) is None:  # (a layer as act_fn: refused below)
        if numerics is not None:
            get_profile(numerics)
        return act_fn(x)
    scale = _static_scale(linear, key)
    if numerics is None:
        numerics = _env_numerics()
    sig, call = _checked_call("maybe", type(act_fn), key, numerics, None, x, scale)
    if call is not None:
        return call(x, scale)
    _check_act_fn(act_fn)
    if isinstance(act_fn, torch.nn.Module) and get_input_quant_key(act_fn) is not None:  # arguments swapped: the activation would run as the layer did
        raise TypeError(f"maybe_fused_act_quant: act_fn is a quantized linear ({type(act_fn).__name__} "
                        f"{getattr(act_fn, 'name', '')!r}), expected the activation module; {_ARGUMENT_ORDER}")
    profile = get_profile(numerics)
    act, name = _act_name_or_none(type(act_fn)), K.key_name_or_none(key)
    if act is None:
        _debug("fused-quant: %s is not a known activation (%s); running it unfused", type(act_fn).__qualname__,
               ", ".join(activations.NAMES))
        return act_fn(x)
    if name is None:
        _debug("fused-quant: no producer makes %s's key %s; running %s unfused", type(linear).__name__, key, act)
        return act_fn(x)
    check_activation_input(x, act)  # malformed input raises; unsupported input falls back
    _check_inference(x, act, key, scale)
    why = _scale_problem(key, scale, x)
    prod, reason, keep = (None, why, False) if why else _producer_for(act, name, x, scale)
    if prod is None:
        _debug("fused-quant: %s -> %s runs as the plain activation: %s", act, name, reason)
        return act_fn(x)
    return _run(prod, x, scale, profile, sig if keep else None, key)


def _check_act_fn(act_fn: object) -> None:
    if not isinstance(act_fn, torch.nn.Module) and (isinstance(act_fn, (str, type)) or not callable(act_fn)):
        raise TypeError(f"maybe_fused_act_quant: act_fn must be the model's activation module (e.g. "
                        f"fused_quant.SiluAndMul()), got {described(act_fn)}; {_ARGUMENT_ORDER}; fused_act_quant "
                        "takes activation names")


def bound_maybe_call(act_fn: torch.nn.Module, x: torch.Tensor, linear: torch.nn.Module | None,
                     numerics: str | NumericsProfile | None = None) -> _BoundCall | None:
    """The bound producer call ``maybe_fused_act_quant(act_fn, x, linear, numerics=numerics)`` runs for input
    with ``x``'s metadata, once such a call has run its checks; None before, where it runs no bound producer
    (unfused, or a producer without ``bind``), or under torch.compile."""
    key = get_input_quant_key(linear)
    if key is None:
        return None
    _, call = _checked_call("maybe", type(act_fn), key, _env_numerics() if numerics is None else numerics, None, x,
                            _static_scale(linear, key))
    return call


def fused_act_quant(act: str | torch.nn.Module, x: torch.Tensor, key: K.QuantKey,
                    scale: torch.Tensor | None = None, *, numerics: str | NumericsProfile | None = "default",
                    backend: str | None = None) -> QuantizedActivation:
    """Activation + quantization as one producer, returning a ``QuantizedActivation``.

    ``act``: "silu_and_mul", "relu2", "identity" or an activation module. With
    ``backend=None`` the current backend runs it and an input its kernels cannot
    take is computed by the ``torch`` backend instead (same bits); a named
    ``backend`` never falls back and raises ``BackendUnavailableError``.

    A module with forward hooks or a ``forward`` of its own is refused (a producer would skip them).

    A static ``scale``'s metadata is checked (float32, one element, x's device) but its value is
    trusted: reading it would cost a host-device sync per call. It must be finite and
    >= ``validation.MIN_STATIC_SCALE`` (0, NaN, Inf or a smaller value give saturated or NaN codes);
    ``QuantLinear`` checks its own ``input_scale`` once on every way it is set.
    """
    # a name by its value (type str exactly: a str subclass may compare or hash otherwise), a module by its type
    act_id = act if type(act) is str else type(act) if isinstance(act, torch.nn.Module) else None
    if type(act) is not str and activations.hooked(act):  # (False for what is not a module)
        raise UnsupportedError(f"fused_act_quant: act {type(act).__name__} has forward hooks or a forward of its own, "
                               "which a producer standing in for it would skip; pass the activation's name, or call "
                               "maybe_fused_act_quant, which runs such a module as it is called")
    sig, call = _checked_call("fused", act_id, key, numerics, backend, x, scale)
    if call is not None:
        return call(x, scale)
    prod, profile, keep = _resolve_fused(act, x, key, scale, numerics, backend)
    return _run(prod, x, scale, profile, sig if keep else None, key)


def bind_fused_act_quant(act: str, x: torch.Tensor, key: K.QuantKey, scale: torch.Tensor | None = None, *,
                         numerics: str | NumericsProfile | None = "default") -> _BoundCall | None:
    """``fused_act_quant(act, x, key, scale)``'s checks run once, without running it: its bound call for
    every input with ``x``'s and ``scale``'s metadata (a layer's fast path), or None when the producer
    that would run has no ``bind``, a tensor requires grad, or a producer without ``bind`` declined the input
    (then call ``fused_act_quant``: its checks run)."""
    sig, call = _checked_call("fused", act, key, numerics, None, x, scale)
    if call is not None or sig is None:
        return call
    prod, profile, keep = _resolve_fused(act, x, key, scale, numerics, None)
    return _bind(prod, x, scale, profile, sig, key) if keep else None


def _check_inference(x: torch.Tensor, act: str, key: K.QuantKey, scale: object) -> None:
    """A producer's output has no gradient (as a QuantLinear's): an input or static scale that requires grad, with
    grad enabled, raises rather than cut the graph silently (a call under no_grad or inference_mode runs)."""
    grads = needing_grad((("input", x), ("static scale", scale)))
    if grads:
        raise UnsupportedError(f"{act} -> {K.key_name(key)}: the fused producers are inference only "
                               f"(quantization has no gradient), and this {grads[0]} requires grad; run under "
                               f"torch.no_grad() / torch.inference_mode(), or detach the {grads[0]}")


def _producer_for(act: str, name: str, x: torch.Tensor,
                  scale: torch.Tensor | None) -> tuple[Producer | None, str, bool]:
    """``(producer, "", keep)``: the current backend's producer of ``act -> name`` for this input or, where it has
    none or declines the input (a CPU tensor on a GPU node, strides its kernels cannot read), the torch backend's:
    the same bits, and a producer still (a plain activation left to the consumer's quantizer would be fused by
    torch.compile with its own rounding; on a GPU the torch backend's ops are slower than the kernels).
    ``(None, why, False)`` where neither accepts it: the torch backend's answer counts too, so nothing runs an
    input it declines. ``keep``: the answer holds for every input with x's and scale's metadata, so a call may
    be filed under its signature; not where a producer without ``bind`` declined (its predicate may read
    values: ``register_producer``)."""
    chosen = current_backend_name()
    prod = _lookup_names(act, name, chosen)
    ok, reason = prod.check(x, scale) if prod else (False, f"{chosen} has no {act} -> {name}")
    if ok or chosen == selection.FALLBACK:
        return (prod if ok else None), reason, ok
    _debug("fused-quant: %s; computing with the torch backend", reason)
    fallback = _lookup_names(act, name, selection.FALLBACK)
    ok, why = fallback.check(x, scale) if fallback else (False, f"no producer for {act} -> {name}")
    if not ok:
        return None, f"{reason}; {selection.FALLBACK}: {why}", False
    return fallback, "", prod is None or prod.bind is not None


def _resolve_fused(act, x, key, scale, numerics, backend) -> tuple[Producer, NumericsProfile, bool]:
    """Every check of ``fused_act_quant``, the producer that runs it and whether its call may be filed under its
    signature (``_producer_for``'s ``keep``)."""
    if isinstance(act, type):
        raise TypeError(f"fused_act_quant: act must be an activation name ({', '.join(activations.NAMES)}) or "
                        f"module instance, got the class {act.__name__}; pass {act.__name__}()")
    if not isinstance(act, (str, torch.nn.Module)):  # e.g. the input passed first: fused_act_quant(x, act, key)
        raise TypeError(f"fused_act_quant: act must be an activation name ({', '.join(activations.NAMES)}) or "
                        f"module instance, got {type(act).__name__}; the order is fused_act_quant(act, x, key)")
    act_name = check_activation(act) if isinstance(act, str) else _act_name(type(act))
    check_activation_input(x, act_name)
    key = K.as_key(key, "fused_act_quant: key")
    _check_inference(x, act_name, key, scale)
    name = K.key_name(key)
    if K.is_static(key):
        check_scale_tensor(scale, device=x.device, what=_SCALE_WHAT[name])
    elif scale is not None:
        raise ScaleError(f"{name} computes its scale per token; pass scale=None")
    profile = get_profile(numerics)
    if backend is None:
        prod, reason, keep = _producer_for(act_name, name, x, scale)
        if prod is None:
            raise BackendUnavailableError(f"no producer accepts {act_name} -> {name} for this input: {reason}")
    else:
        selection.get_backend(backend)
        prod = _lookup_names(act_name, name, backend)
        ok, reason = prod.check(x, scale) if prod else (False, f"no producer registered for {act_name} -> {name}")
        if not ok:
            raise BackendUnavailableError(f"backend {backend} cannot run {act_name} -> {name}: {reason}")
        keep = True
    return prod, profile, keep


def quantize(x: torch.Tensor, key: K.QuantKey, scale: torch.Tensor | None = None, *,
             backend: str | None = None) -> QuantizedActivation:
    """Quantize a plain activation with the backend's fastest quantizer (identity producer)."""
    return fused_act_quant("identity", x, key, scale, backend=backend)
