"""GEMM providers and the one checked entry every consumer GEMM goes through.

``quant_gemm`` validates rank, K agreement, token count, dtypes, scale shapes,
device and contiguity (metadata only: no sync, CUDA-graph safe), then calls the
first provider of the backend that is not disabled by FUSED_QUANT_DISABLED_GEMMS
and whose predicate accepts the problem, then checks what the provider returned.
No provider, built-in or user-registered, can be reached with unchecked operands.

Provider call: ``fn(xq [M, K], xs [M, 1] | [1, 1], w [N, K], ws [N, 1] | [1, 1],
bias [N] | None, out_dtype) -> out [M, N]`` with
``out = Tout(float(xq @ w.T) * xs * ws) + bias`` (docs/NUMERICS.md, consumer GEMMs).
A provider may also have ``bind(problem, w, ws, bias) -> call(xq, xs) -> out``: ``fn``'s work for
one layer's operands and one problem, resolved once (views of the weight and scales, the kernel
launch); and ``bind_quantizing(problem, w, ws, bias, quantizer) -> call(x, scale) -> out`` or None:
the same for a float activation ``x [M, K]`` and its per-tensor ``scale`` (None for a per-token
key, whose scales the provider works out), which the provider quantizes itself, bit for bit as the
bound producer launch ``quantizer`` would (``QuantLinear``'s plain-tensor input in eager calls: one
launch for both; also under CUDA graph capture where the call's ``under_capture`` attribute is true,
i.e. where it costs the GPU less than the producer and the GEMM); and ``bind_producing(problem, w, ws, bias,
producer, quantizer=None) -> call(x, xs, scale) -> q`` or None: the same GEMM applying the next layer's bound
producer launch ``producer`` (an activation and a per-tensor quantizer) to its output and returning that
producer's ``q``, bit for bit (``modules.linear_act_quant``; with ``quantizer``, from the float activation
as ``bind_quantizing``'s call). ``bind_gemm`` is the checked entry's bound
form: it runs every check once and returns a ``BoundGemm`` for every later call whose operands have
the same metadata (a layer's fast path).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from fused_quant import envs, runtime, selection
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.tracing import graph_constant
from fused_quant.validation import (  # noqa: F401  (GemmProblem: what providers' predicates receive)
    BackendUnavailableError,
    GemmProblem,
    GemmProviderError,
    UnsupportedError,
    check_backend_names,
    check_gemm_operands,
    check_predicate_answer,
    check_takes,
    needing_grad,
)


GemmFn = Callable[..., torch.Tensor]
GemmSupportFn = Callable[[GemmProblem], "tuple[bool, str]"]
GemmBindFn = Callable[..., Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]


@dataclass(frozen=True)
class GemmProvider:
    name: str
    kind: str
    fn: GemmFn
    supported: GemmSupportFn | None = None
    bind: GemmBindFn | None = None  # bind(problem, w, ws [N, 1] | [1, 1], bias) -> call(xq [M, K], xs)
    # bind_quantizing(problem, w, ws, bias, quantizer) -> call(x [M, K] float, per-tensor scale | None) or None
    bind_quantizing: Callable | None = None
    # bind_producing(problem, w, ws, bias, producer, quantizer=None) -> call(x, xs, producer's scale) -> q or None
    bind_producing: Callable | None = None

    def check(self, problem: GemmProblem) -> tuple[bool, str]:
        if problem.kind != self.kind:
            return False, f"{self.name} is a {self.kind} GEMM"
        if self.supported is None:
            return True, ""
        return check_predicate_answer(self.supported(problem), lambda: f"GEMM provider {self.name}")


# backend name -> providers in selection order; key None: providers for every backend, tried first; key
# AFTER_EACH: providers for every backend registered with first=False, tried after each backend's own. Every key is
# there from the start and each chain is a tuple: a change (under ``runtime.changing()``) puts new tuples in place;
# ``_chain`` reads the three a backend's order is made of under the same lock
AFTER_EACH = "(after each backend's own)"
_PROVIDERS: dict[str | None, tuple[GemmProvider, ...]] = {key: () for key in (None, *selection.BACKENDS, AFTER_EACH)}


def register_gemm_provider(name: str, fn: GemmFn | None = None, *, kind: str,
                           backends: tuple[str, ...] | None = None, supported: GemmSupportFn | None = None,
                           first: bool = True, bind: GemmBindFn | None = None,
                           bind_quantizing: Callable | None = None, bind_producing: Callable | None = None):
    """Register a GEMM provider (as a call or a decorator) for some backends, or all (None).

    ``first`` puts it ahead of the providers already there (for all backends: ahead of each backend's own);
    ``first=False`` after them (for all backends: after each backend's own providers, so it serves what a GPU
    backend's kernels decline, before the torch backend's exact providers the chain falls back to; on the torch
    backend itself, whose exact providers take every problem, it is never reached). Re-registering a name replaces the
    old entry in the chains the new one serves, and an entry for all backends (idempotent for plugins); one for
    all backends replaces every entry of the name. ``bind`` and ``bind_quantizing``, optional: see the
    module docstring.
    """
    who = f"register_gemm_provider({name!r})"
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_gemm_provider: name must be a non-empty string, got {name!r}")
    if kind not in ("int8", "fp8"):
        raise UnsupportedError(f"{who}: kind must be 'int8' or 'fp8', got {kind!r}")
    if not isinstance(first, bool):
        raise TypeError(f"{who}: first must be True or False, got {first!r}")
    if backends is not None:
        backends = check_backend_names(backends, who, selection.BACKENDS)
    # what each is called with (the module docstring): one that cannot take it is refused here
    takes = (("supported", supported, "(problem)"), ("bind", bind, "(problem, weight, weight_scale, bias)"),
             ("bind_quantizing", bind_quantizing, "(problem, weight, weight_scale, bias, quantizer)"),
             ("bind_producing", bind_producing, "(problem, weight, weight_scale, bias, producer, quantizer=None)"))
    for what, f, call in takes:
        if f is not None and not callable(f):
            raise TypeError(f"{who}: {what} must be callable or None, got {type(f).__name__}")
        n = call.count(",") + 1
        for args in (n - 1, n) if call.endswith("=None)") else (n,):  # called with and without the last
            check_takes(f, f"{who}: {what}", call, *(None,) * args)

    def add(f: GemmFn) -> GemmFn:
        if not callable(f):
            raise TypeError(f"{who}: the provider must be callable, got {type(f).__name__}")
        check_takes(f, f"{who}: the provider", "(x, x_scale, weight, weight_scale, bias, out_dtype)", *(None,) * 6)
        provider = GemmProvider(name, kind, f, supported, bind, bind_quantizing, bind_producing)
        with runtime.changing():
            other = {p.kind for chain in _PROVIDERS.values() for p in chain if p.name == name} - {kind}
            if other:  # replacing it would take that kind's provider out of the chain, and its layers with it
                raise GemmProviderError(f"{who}: {name!r} is a registered {other.pop()} provider; a {kind} provider "
                                        f"needs its own name (or unregister_gemm_provider({name!r}) first)")
            # out of the chains it serves, and of every backend's (an entry there would still answer before or
            # after it); another backend's own entry of the name stays (the backends register theirs so)
            chains = _without(name, tuple(_PROVIDERS) if backends is None else (*backends, None, AFTER_EACH))
            for key in backends or ((None,) if first else (AFTER_EACH,)):
                chains[key] = (provider, *chains[key]) if first else (*chains[key], provider)
            _PROVIDERS.update(chains)
            runtime.reset()  # cached provider choices may differ now
        return f

    return add(fn) if fn is not None else add


def unregister_gemm_provider(name: str) -> None:
    """Take the provider registered as ``name`` out of every chain; a name no provider has raises (a misspelt
    name would leave the provider serving)."""
    if not isinstance(name, str):
        raise TypeError(f"unregister_gemm_provider: name must be a provider's name (a string), got {name!r}")
    with runtime.changing():
        if name not in provider_names():
            raise GemmProviderError(f"unregister_gemm_provider: no GEMM provider is registered as {name!r}; "
                                    f"registered: {', '.join(sorted(provider_names()))}")
        _PROVIDERS.update(_without(name, tuple(_PROVIDERS)))
        runtime.reset()


def _without(name: str, keys: tuple) -> dict[str | None, tuple[GemmProvider, ...]]:
    """The chains of ``keys`` without the provider ``name``: new tuples, for a change to put in place."""
    return {key: tuple(p for p in _PROVIDERS.get(key, ()) if p.name != name) for key in dict.fromkeys(keys)}


def _chain(backend: str) -> tuple[GemmProvider, ...]:
    """Every provider registered for ``backend`` in selection order, disabled ones included. Read under the
    registration lock: a change moving a provider between the chains read here (a re-registration for every backend)
    is never seen half done, and a provider choice is made once per problem and cached."""
    with runtime.changing():
        return (*_PROVIDERS.get(None, ()), *_PROVIDERS.get(backend, ()), *_PROVIDERS.get(AFTER_EACH, ()))


@graph_constant
def _disabled_gemms() -> frozenset[str]:
    """FUSED_QUANT_DISABLED_GEMMS, read once per runtime generation (``fused_quant.reset()`` reads it again)."""
    return runtime.once("disabled_gemms", _read_disabled_gemms)


@contextlib.contextmanager
def unknown_disabled_gemms_told_elsewhere():
    """Within it, ``_read_disabled_gemms``' warning is not given: for a caller that names a misspelt
    ``FUSED_QUANT_DISABLED_GEMMS`` entry in its own words (the CLI's warning line, the vLLM plugin's log line)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", envs.UNKNOWN_DISABLED_GEMMS, RuntimeWarning)
        yield


def _read_disabled_gemms() -> frozenset[str]:
    """The variable's names, with a warning where one names no registered provider: a misspelt name disables
    nothing, and the provider it meant keeps serving (``fused-quant probe`` says so too)."""
    unknown = envs.unknown_disabled_gemms(provider_names())
    if unknown:
        warnings.warn(f"{unknown}: it disables nothing", RuntimeWarning, stacklevel=2)
    return envs.disabled_gemms()


def provider_names() -> set[str]:
    """The names of every registered provider, disabled ones included."""
    with runtime.changing():
        return {p.name for chain in _PROVIDERS.values() for p in chain}


def gemm_providers(backend: str, kind: str | None = None) -> list[GemmProvider]:
    """Providers serving ``backend`` in selection order, without the disabled ones."""
    disabled = _disabled_gemms()
    return [p for p in _chain(backend) if p.name not in disabled and (kind is None or p.kind == kind)]


def kinds_without_gemms(backend: str) -> list[str]:
    """The GEMM kinds (int8, fp8) without an enabled provider in ``backend``'s chain (its own providers, then
    torch's): every GEMM of such a kind would be refused."""
    chain = gemm_providers(backend) + gemm_providers(selection.FALLBACK)
    return [kind for kind in ("int8", "fp8") if not any(p.kind == kind for p in chain)]


def kinds_left_without_gemms(backend: str) -> str:
    """'' or a message naming the GEMM kinds that ``FUSED_QUANT_DISABLED_GEMMS`` leaves without a provider in
    ``backend``'s chain (``kinds_without_gemms``)."""
    if not envs.disabled_gemms():
        return ""
    empty = kinds_without_gemms(backend)
    if not empty:
        return ""
    return (f"FUSED_QUANT_DISABLED_GEMMS leaves no {' and no '.join(empty)} GEMM provider for backend {backend}: "
            f"every such GEMM call will be refused")


def disabled_gemms_warning(backend: str | None) -> dict[str, str]:
    """The commands' (probe, selftest, bench) FUSED_QUANT_DISABLED_GEMMS warning, or none: names that disable
    nothing (a provider the application registers is unknown to a command), and the GEMM kinds the names leave
    ``backend``'s chain without (a node may never run one kind): warnings, not errors."""
    said = [m for m in (envs.unknown_disabled_gemms(provider_names()),
                        kinds_left_without_gemms(backend) if backend else "") if m]
    return {"FUSED_QUANT_DISABLED_GEMMS": "; ".join(said)} if said else {}


# (problem, backend, disabled names, current backend) -> choice. Predicates are pure functions
# of the problem and of process-wide facts, so a choice is reused until the runtime state resets.
_SELECTED = runtime.Cache("gemm_selection")


def select_gemm_provider(problem: GemmProblem, backend: str | None = None) -> tuple[GemmProvider, str]:
    """The first provider that accepts ``problem``; with ``backend=None`` the current
    backend's providers, then the torch backend's. Raises BackendUnavailableError with every reason."""
    # a named backend's chain is that backend's alone: the current one is not read (it may be one this node cannot
    # run, FUSED_QUANT_BACKEND=triton_fp8 on a CPU node, while the torch backend named here can)
    current = selection.current_backend_name() if backend is None else None
    cache_key = (problem, backend, _disabled_gemms(), current)
    hit = _SELECTED.get(cache_key)
    if hit is not None:
        return hit
    generation = runtime.generation()
    chain = [backend] if backend else list(dict.fromkeys([current, selection.FALLBACK]))
    reasons = []
    for name in chain:
        for provider in gemm_providers(name, problem.kind):
            ok, why = provider.check(problem)
            if ok:
                return _SELECTED.put(cache_key, (provider, name), generation)
            reasons.append(f"{provider.name}: {why}")
    disabled = sorted(_disabled_gemms())
    registered = any(p.kind == problem.kind for name in chain for p in _chain(name))
    raise BackendUnavailableError(
        f"no {problem.kind} GEMM provider accepts M={problem.m} N={problem.n} K={problem.k} on "
        f"{problem.device} ({'; '.join(reasons) or ('each one disabled' if registered else 'none registered')})"
        + (f"; disabled by FUSED_QUANT_DISABLED_GEMMS: {', '.join(disabled)}" if disabled else "")
    )


def quant_gemm(qa: QuantizedActivation, weight: torch.Tensor, weight_scale: torch.Tensor,
               bias: torch.Tensor | None = None, *, out_dtype: torch.dtype, layer: str | None = None,
               backend: str | None = None) -> torch.Tensor:
    """The checked entry: validate, pick a provider, call it, check its output; ``[*lead, N]``.

    Under torch.compile this is one opaque custom op (``fused_quant::quant_gemm``), so provider
    choice happens at run time and no provider's shape rules become recompile guards.
    """
    if layer is not None and not isinstance(layer, str):  # a module here crashed torch.compile's op call
        raise TypeError(f"quant_gemm: layer must be the layer's name (a str) or None, got {type(layer).__name__}")
    if not isinstance(qa, QuantizedActivation):
        raise TypeError(f"{layer or 'quant_gemm'}: expected a QuantizedActivation, got {type(qa).__name__}")
    key = K.key_name(K.as_key(qa.quant_key, f"{layer or 'quant_gemm'}: QuantizedActivation.quant_key"))
    if backend is not None:
        selection.get_backend(backend)  # an unknown name raises, listing the valid ones
    if torch.compiler.is_compiling():  # the op's backward refuses a gradient (ops.py): a raise here would be traced
        # the checks while tracing too (metadata only): a refusal is then ours, raised by the frame that runs
        # eager after the break (or dynamo's own error, ours in it, under fullgraph), not torch's error around
        # the fake implementation's
        check_gemm_operands(qa.data, qa.scale, K.key_from_name(key), weight, weight_scale, bias, out_dtype, layer)
        return torch.ops.fused_quant.quant_gemm(qa.data, qa.scale, weight, weight_scale, bias, out_dtype, key,
                                                layer or "", backend or "")
    if torch.is_grad_enabled():  # first: every call of the vLLM plugin comes here, without grad
        grads = needing_grad(zip(GEMM_OPERANDS, (qa.data, qa.scale, weight, weight_scale, bias)))
        if grads:  # the providers have no backward
            raise inference_only(layer, grads)
    return checked_gemm(qa.data, qa.scale, weight, weight_scale, bias, out_dtype, key, layer or "", backend or "")


GEMM_OPERANDS = ("activation", "activation scale", "weight", "weight scale", "bias")


def inference_only(layer: str | None, grads: list[str]) -> UnsupportedError:
    """The error of a quantized GEMM given operands that require grad (``grads``, their names)."""
    return UnsupportedError(f"{layer or 'quant_gemm'}: the quantized GEMM is inference only; its {', '.join(grads)} "
                            "require(s) grad: run it under torch.no_grad() / torch.inference_mode(), or detach them")


def checked_gemm(x: torch.Tensor, xs: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor,
                 bias: torch.Tensor | None, out_dtype: torch.dtype, key: str, layer: str, backend: str) -> torch.Tensor:
    """Body of the checked entry (also the custom op's implementation)."""
    p = check_gemm_operands(x, xs, K.key_from_name(key), weight, weight_scale, bias, out_dtype, layer or None)
    out_shape = (*x.shape[:-1], p.n)
    if p.m == 0 or p.n == 0:
        return torch.empty(out_shape, dtype=out_dtype, device=x.device)
    xs2 = xs.reshape(p.m, 1) if p.per_token else xs.reshape(1, 1)
    if p.k == 0:  # an empty sum: the epilogue of a zero accumulator, with no provider (no kernel takes K = 0)
        acc = torch.zeros((p.m, p.n), dtype=torch.float32, device=x.device)
        return dequant_epilogue(acc, xs2, weight_scale, bias, out_dtype).reshape(out_shape)
    provider, _ = select_gemm_provider(p, backend or None)
    ws2 = weight_scale.reshape(-1, 1)
    if provider.bind is not None:  # the checked problem decides, as on the bound path
        out = provider.bind(p, weight, ws2, bias)(x.reshape(p.m, p.k), xs2)
    else:
        out = provider.fn(x.reshape(p.m, p.k), xs2, weight, ws2, bias, out_dtype)
    _check_output(out, p, provider, layer, x.device)
    return out.reshape(out_shape)


def output_mismatch(out: object, shape: tuple[int, int], dtype: torch.dtype, device: torch.device, *,
                    contiguous: bool = False) -> str:
    """What a GEMM returned ("" where it is what was asked: a ``shape`` tensor of ``dtype`` on ``device``, and
    contiguous where ``contiguous``), as the errors name it."""
    if not isinstance(out, torch.Tensor):
        return type(out).__name__
    strided = contiguous and not out.is_contiguous()
    if out.shape == shape and out.dtype == dtype and out.device == device and not strided:
        return ""
    return f"{tuple(out.shape)} {out.dtype} on {out.device}" + (", strided" if strided else "")


def _check_output(out: object, p: GemmProblem, provider: GemmProvider, layer: str, device: torch.device) -> None:
    # row-major, as the GEMM op's fake implementation says it is (a compiled graph reads it with those strides)
    got = output_mismatch(out, (p.m, p.n), p.out_dtype, device, contiguous=True)
    if got:
        raise GemmProviderError(f"{layer or 'quant_gemm'}: GEMM provider {provider.name} returned {got}, "
                                f"expected ({p.m}, {p.n}) {p.out_dtype} on {device}, row-major")


class BoundGemm:
    """The checked entry for one layer's operands and one activation signature (dtype, shape, device,
    and the scale's): the checks ran once, the provider is chosen and bound. ``__call__(x, xs)``
    takes an activation with the metadata it was bound for (the caller keys on it) and returns
    ``[*lead, N]``; the provider's first output is checked, later ones are not. ``from_float``, where
    the provider has bound one: the provider's own quantizing call for the float activation the bound
    producer launch quantizes (``quantizing``; its first output is checked too), and whether it is used
    under CUDA graph capture too (``float_captured``: its ``under_capture``)."""

    __slots__ = ("call", "from_float", "float_captured", "x_rows", "xs_rows", "out_shape", "provider", "problem",
                 "layer", "checked", "checked_float")

    def __init__(self, call, x_rows, xs_rows, out_shape, provider, problem, layer, from_float=None):
        self.call, self.x_rows, self.xs_rows, self.out_shape = call, x_rows, xs_rows, out_shape
        self.provider, self.problem, self.layer, self.checked = provider, problem, layer, False
        self.from_float, self.checked_float = from_float, False
        self.float_captured = getattr(from_float, "under_capture", False) is True

    def __call__(self, x: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
        # views only where the operand is not already as the provider takes it (None: as it is)
        x_rows, xs_rows = self.x_rows, self.xs_rows
        out = self.call(x if x_rows is None else x.view(x_rows), xs if xs_rows is None else xs.reshape(xs_rows))
        if not self.checked:
            _check_output(out, self.problem, self.provider, self.layer, x.device)
            self.checked = True
        return out if self.out_shape is None else out.view(self.out_shape)

    def quantizing(self, x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
        """The GEMM of the float activation ``x`` (the metadata the producer launch was bound for) and its
        per-tensor ``scale`` (None for a per-token key), quantized by the provider: the bits of
        ``self(*producer(x, scale))``."""
        x_rows = self.x_rows
        out = self.from_float(x if x_rows is None else x.view(x_rows), scale)
        if not self.checked_float:
            _check_output(out, self.problem, self.provider, self.layer, x.device)
            self.checked_float = True
        return out if self.out_shape is None else out.view(self.out_shape)


def bind_gemm(x: torch.Tensor, xs: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor,
              bias: torch.Tensor | None, out_dtype: torch.dtype, key: K.QuantKey, layer: str | None = None,
              backend: str | None = None, quantizer: object = None) -> BoundGemm | None:
    """Check ``x``'s call as the checked entry does and bind the chosen provider to these operands;
    None for an empty M, N or K (nothing to bind: ``quant_gemm`` answers it) and for a strided weight scale or bias
    (the checked entry runs each call). A provider's bound call takes a per-tensor scale of one
    element and rank <= 2 (``[1]``, as static input scales are kept, or ``[1, 1]``; others are viewed so);
    its plain ``fn`` gets ``[1, 1]``. ``quantizer``: the bound producer launch that made ``x`` from a
    float activation; the provider may bind its ``bind_quantizing`` for it (``BoundGemm.from_float``)."""
    p = check_gemm_operands(x, xs, key, weight, weight_scale, bias, out_dtype, layer)
    if 0 in (p.m, p.n, p.k) or not weight_scale.is_contiguous() or not (bias is None or bias.is_contiguous()):
        # a provider would bind a contiguous copy of a strided scale or bias, which a write into the layer's own
        # tensor leaves stale (QuantLinear holds them contiguous; a tensor put into ``_buffers`` may not be)
        return None
    provider, _ = select_gemm_provider(p, backend)
    ws2 = weight_scale.reshape(-1, 1)
    if provider.bind is not None:
        call = provider.bind(p, weight, ws2, bias)
    else:
        fn = provider.fn
        call = lambda x2, xs2: fn(x2, xs2, weight, ws2, bias, out_dtype)  # noqa: E731
    xs_rows = (p.m, 1) if p.per_token else (1, 1)
    as_given = tuple(xs.shape) == xs_rows or (provider.bind is not None and not p.per_token and xs.dim() <= 2)
    flat = x.dim() == 2
    from_float = None
    if quantizer is not None and provider.bind_quantizing is not None:
        from_float = provider.bind_quantizing(p, weight, ws2, bias, quantizer)
    return BoundGemm(call, None if flat else (p.m, p.k), None if as_given else xs_rows,
                     None if flat else (*x.shape[:-1], p.n), provider, p, layer or "", from_float)


def dequant_epilogue(acc: torch.Tensor, xs: torch.Tensor, ws: torch.Tensor, bias: torch.Tensor | None,
                     out_dtype: torch.dtype) -> torch.Tensor:
    """``Tout(float(acc) * xs * ws) + bias``: the one epilogue order every int8 provider follows."""
    out = (acc.to(torch.float32) * xs * ws.reshape(1, -1)).to(out_dtype)
    return out if bias is None else out + bias
