"""The consumer ``QuantLinear`` and the HCU surface ``FusedSiluAndMulAndQuant``.

``QuantLinear.forward(x=None, x_and_scale_quanted=None)`` takes a plain tensor
(quantized inside by the backend's quantizer), a ``QuantizedActivation``, or the
HCU ``(xq, xs)`` tuple next to an ignored placeholder whose token dims must
match. Every path ends in the checked GEMM entry, never in a provider directly.
"""

from __future__ import annotations

import reprlib
import warnings
import weakref

import torch
from torch import nn

from fused_quant import runtime
from fused_quant import keys as K
from fused_quant.activations import ReLUSquared, SiluAndMul  # noqa: F401  (their long-standing import path)
from fused_quant.activations import hooked
from fused_quant.contract import (QuantizedActivation, as_quantized_activation, expose_input_quant_key,
                                  get_input_quant_key)
from fused_quant.gemm import bind_gemm, quant_gemm
from fused_quant.numerics import get_profile
from fused_quant.reference import quantize_weight_ref
from fused_quant.registry import bound_maybe_call, maybe_fused_act_quant
from fused_quant.runtime import capturing
from fused_quant.validation import (
    ACT_DTYPES,
    FP8_DTYPES,
    MIN_STATIC_SCALE,
    DeviceMismatchError,
    GemmProviderError,
    LayoutError,
    QuantDTypeError,
    QuantKeyMismatchError,
    ScaleError,
    ShapeMismatchError,
    UnsupportedError,
    check_activation_k,
    check_scale_tensor,
    check_bias_values,
    check_dense,
    check_out_dtype,
    check_plain_input_dtype,
    described,
    check_static_scale_value,
    check_weight_scale_shape,
    check_weight_scale_values,
    check_weight_values,
    needing_grad,
)


class FusedSiluAndMulAndQuant(nn.Module):
    """The Hygon DCU fork's fused module: ``forward(x, quant_dtype=torch.int8) -> (xq, xs)``.

    silu_and_mul + per-token quantization in one producer of the current backend; ``xq``
    is int8 (or the node's FP8 dtype), ``xs`` float32 ``[*, 1]``. ``numerics`` None means
    FUSED_QUANT_NUMERICS (``hcu`` reproduces the DCU kernel, ``default`` the eager chain).
    """

    def __init__(self, numerics: str | None = None):
        super().__init__()
        if numerics is not None and numerics != "":  # None or "": FUSED_QUANT_NUMERICS, read once per runtime
            # state (after fused_quant.reset() a change takes effect); anything else names a profile or fails here
            get_profile(numerics)
        self.numerics = numerics

    def __prepare_scriptable__(self):
        raise UnsupportedError(f"FusedSiluAndMulAndQuant: torch.jit.script; {_NO_TORCHSCRIPT}")

    def extra_repr(self) -> str:
        return f"numerics={self.numerics!r}" if self.numerics else "numerics=FUSED_QUANT_NUMERICS"

    def forward(self, x: torch.Tensor, quant_dtype: torch.dtype = torch.int8) -> tuple[torch.Tensor, torch.Tensor]:
        """``x``: ``[*, 2d]`` bf16 / fp16 / fp32 holding [gate | up]; ``(xq [*, d], xs [*, 1])`` quantized per token
        to ``quant_dtype`` (torch.int8 or this node's FP8 dtype)."""
        from fused_quant.registry import _env_numerics, fused_act_quant, platform_fp8_dtype

        if _tracing_state() is not None:
            raise UnsupportedError(f"FusedSiluAndMulAndQuant: called under torch.jit.trace; {_NO_TORCHSCRIPT}")
        if isinstance(x, torch.fx.Proxy):
            raise UnsupportedError(f"FusedSiluAndMulAndQuant: {_NO_FX}")
        if quant_dtype == torch.int8:
            key = K.kInt8DynamicTokenSym
        elif quant_dtype == platform_fp8_dtype():
            key = K.kFp8DynamicTokenSym
        elif not isinstance(quant_dtype, torch.dtype):  # "int8" would read as a refused int8
            raise TypeError(f"FusedSiluAndMulAndQuant: quant_dtype must be a torch.dtype (torch.int8 or this node's "
                            f"FP8 dtype {platform_fp8_dtype()}), got {described(quant_dtype)}")
        else:
            raise QuantDTypeError(f"FusedSiluAndMulAndQuant: quant_dtype must be torch.int8 or this node's FP8 dtype "
                                  f"{platform_fp8_dtype()}, got {quant_dtype}")
        qa = fused_act_quant("silu_and_mul", x, key, numerics=self.numerics or _env_numerics())
        return qa.data, qa.scale


def _default_name(k: int, n: int) -> str:
    return f"QuantLinear(in_features={k}, out_features={n})"


def _version(t: torch.Tensor) -> int:
    """A tensor's in-place version (inference-mode tensors keep none: -1)."""
    return -1 if t.is_inference() else t._version


def _scale_tensor(scale: object, what: str, layer: str) -> torch.Tensor:
    """A static input scale as given (a Python number, or a one-element float32 tensor): as a tensor, its metadata
    checked (its value is checked where it is set)."""
    if scale is None:  # as check_scale_tensor names a missing scale
        raise ScaleError(f"{layer}: {what} must be a number or a one-element float32 tensor, got None (a static key "
                         "needs its scale)")
    if not isinstance(scale, torch.Tensor):
        try:  # a Python or numpy number (not a numpy array: float() of one is an error in numpy 2); never a
            # string or a bool
            if isinstance(scale, (str, bytes, bool)):
                raise TypeError
            scale = torch.tensor([float(scale)], dtype=torch.float32)
        except OverflowError:  # an int past float's range: a value a static scale cannot be, as 1e300
            raise ScaleError(f"{layer}: {what} must be finite and >= {MIN_STATIC_SCALE:.8g} in float32, got "
                             f"{type(scale).__name__} {reprlib.repr(scale)}") from None
        except (TypeError, ValueError):
            raise TypeError(f"{layer}: {what} must be a number or a one-element float32 tensor, got "
                            f"{type(scale).__name__} {reprlib.repr(scale)}") from None
    return check_scale_tensor(scale, device=scale.device, what=what, layer=layer)


def _check_weight(weight: object, key: K.QuantKey, where: str) -> None:
    """A quantized weight by itself, on every way one comes in (built, assigned): a 2-D tensor of the key's
    format in the canonical layout every GEMM reads (a transposed view is not it)."""
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{where}: weight must be a torch.Tensor, got {type(weight).__name__}")
    if weight.dim() != 2 or 0 in weight.shape:
        raise ShapeMismatchError(f"{where}: weight must be 2-D [N, K] with N, K > 0, got shape {tuple(weight.shape)}",
                                 layer=where, w_shape=weight.shape)
    check_dense(weight, f"{where}: weight")
    if not weight.is_contiguous():
        raise LayoutError(f"{where}: weight must be contiguous [N, K] (K contiguous), got strides "
                          f"{weight.stride()}; pass weight.contiguous()")
    kind, want = ("fp8", FP8_DTYPES) if K.is_fp8(key) else ("int8", (torch.int8,))
    if weight.dtype not in want:
        raise QuantDTypeError(f"{where}: key {K.key_name(key)} needs {kind} weights "
                              f"({', '.join(str(d) for d in want)}), got {weight.dtype}; "
                              "QuantLinear.from_float quantizes a float weight")
    check_weight_values(weight, layer=where)


def _check_bias(bias: object, where: str) -> None:
    """A bias by itself, built or assigned: a float tensor [N] (held in the output dtype; its N and device are checked
    with the weight's where it is built, and at the next call where it is assigned, as loaders set one tensor at a
    time: the bias before the weight, or beside a weight still on the meta device)."""
    if not isinstance(bias, torch.Tensor) or bias.dim() != 1:
        got = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
        raise ShapeMismatchError(f"{where}: bias must be a 1-D tensor [N], got {got}", layer=where)
    check_dense(bias, f"{where}: bias")
    if not bias.is_floating_point():
        raise QuantDTypeError(f"{where}: bias must be floating point (it is held in the output dtype), got {bias.dtype}")


def _held_scale(ws: torch.Tensor) -> torch.Tensor:
    """A weight scale as a layer holds it: float32 [N, 1] (or [1, 1]), contiguous. The tensor given where it has that
    layout already (the layer's scale is then the caller's tensor); else a copy, made once here: a bound call never
    holds a copy of its own, which a write into the layer's tensor would leave stale."""
    return ws.to(torch.float32).reshape(-1, 1).contiguous()


def _held_bias(bias: torch.Tensor, out_dtype: torch.dtype, where: str) -> torch.Tensor:
    """A bias as a layer holds it: in the output dtype, contiguous (as ``_held_scale``), its values finite there
    (``check_bias_values``)."""
    check_bias_values(bias, out_dtype, layer=where)
    return bias.to(out_dtype).contiguous()


def _check_initialized(linear: nn.Linear, where: str, then: str) -> None:
    """An ``nn.LazyLinear`` before its first call has no weight to quantize yet."""
    if isinstance(linear.weight, nn.parameter.UninitializedParameter):
        raise UnsupportedError(f"{where}: {type(linear).__name__}'s weight is not initialized yet (a lazy module "
                               f"learns in_features at its first forward); call it once, then {then}")


def _check_weights(weight, weight_scale, bias, key: K.QuantKey, where: str) -> None:
    """What a QuantLinear is built from, checked when it is built (not at its first forward)."""
    _check_weight(weight, key, where)
    if not isinstance(weight_scale, torch.Tensor):
        raise TypeError(f"{where}: weight_scale must be a torch.Tensor, got {type(weight_scale).__name__}")
    check_dense(weight_scale, f"{where}: weight_scale")
    n = weight.shape[0]
    check_weight_scale_shape(weight_scale, n, layer=where)
    if not weight_scale.is_floating_point():
        raise ScaleError(f"{where}: weight_scale must be floating point, got {weight_scale.dtype}")
    if weight_scale.device != weight.device:
        raise DeviceMismatchError(f"{where}: weight_scale is on {weight_scale.device}, weight on {weight.device}")
    check_weight_scale_values(weight_scale, layer=where)
    if bias is not None:
        _check_bias(bias, where)
        if bias.shape[0] != n:
            raise ShapeMismatchError(f"{where}: bias must be [N={n}], got {tuple(bias.shape)}", layer=where, n=n)
        if bias.device != weight.device:
            raise DeviceMismatchError(f"{where}: bias is on {bias.device}, weight on {weight.device}")


def _check_float_weight(w: torch.Tensor, ws: torch.Tensor, where: str) -> None:
    """A float weight whose channel scale (the row's absmax / qmax) is not finite: named by the weight's value and
    place, not as the weight scale it would give. Reads values (meta tensors have none), once, at conversion."""
    if ws.device.type == "meta":
        return
    w, bad = w.detach(), ~torch.isfinite(ws.reshape(-1))
    if bad.any():
        row = int(bad.nonzero()[0, 0])
        col = int((~torch.isfinite(w[row])).nonzero()[0, 0])
        raise ScaleError(f"{where}: the float weight has a non-finite value in output channel {row} "
                         f"({float(w[row, col])!r} at [{row}, {col}]; {int(bad.sum())} of {w.shape[0]} channels): its "
                         "scale, the row's absmax over the format's max, would not be finite; fix the float weights "
                         "before quantizing them")


# QuantLinear attributes a bound call depends on: setting any of them drops the layer's bound calls
_BOUND_TO = frozenset({"weight", "weight_scale", "bias", "input_scale", "input_key", "out_dtype", "name"})
_TENSORS = ("weight", "weight_scale", "bias", "input_scale")  # the layer's buffers
_TENSOR, _QUANTIZED, _HCU_PAIR = 0, 1, 2
_grad_enabled = torch.is_grad_enabled
_tracing_state = torch._C._get_tracing_state  # torch.jit.trace's state, None outside a trace
_NO_TORCHSCRIPT = ("TorchScript cannot hold fused-quant's modules (QuantLinear, FusedSiluAndMulAndQuant): a trace "
                   "records no Triton or driver launch (on a GPU its "
                   "graph would return memory no kernel wrote), and script cannot compile its Python; use "
                   "torch.compile or torch.export")
_NO_FX = ("torch.fx.symbolic_trace cannot trace into fused-quant's modules (QuantLinear, FusedSiluAndMulAndQuant): "
          "their calls check real tensors and launch kernels; use torch.compile or torch.export, or keep the "
          "module a leaf of the trace (a torch.fx.Tracer whose is_leaf_module says so)")
_STRIDED = torch.strided
_MISSING = object()
MAX_BOUND = 256  # call signatures a layer keeps bound (more, e.g. every token count of a server: start over)


def _no_sync_now(t: torch.Tensor) -> bool:
    """Whether reading ``t``'s value now is impossible: a CUDA tensor while the stream is captured."""
    return t.is_cuda and capturing()


def _signature(x: object, pair: object) -> tuple | None:
    """What a QuantLinear call's checks read (the input's form and its tensors' metadata); None when
    the input is not plain tensors (the full checks run and name what is wrong) or a tensor of it
    requires grad (the checks then raise where grad is enabled, so such a call is never bound), and for a
    tensor that is not dense: a sparse one (a COO tensor's strides are a dense expanded one's) or a nested one
    (which has neither sizes nor strides)."""
    try:  # no cost where nothing raises
        if pair is None:
            if type(x) is torch.Tensor:
                return None if x.requires_grad or x.layout is not _STRIDED else (_TENSOR, x.dtype, x.shape, x.stride(),
                                                                                x.device)
            if type(x) is QuantizedActivation:
                d, s = x.data, x.scale
                if type(d) is torch.Tensor and type(s) is torch.Tensor and not (d.requires_grad or s.requires_grad):
                    return (_QUANTIZED, id(x.quant_key), d.dtype, d.shape, d.stride(), d.device,
                            s.dtype, s.shape, s.stride(), s.device)
            return None
        if type(pair) is not tuple or len(pair) != 2:
            return None
        xq, xs = pair
        if type(xq) is not torch.Tensor or type(xs) is not torch.Tensor or xq.requires_grad or xs.requires_grad:
            return None
        if x is None:
            placeholder = None
        elif type(x) is torch.Tensor and not x.requires_grad:
            placeholder = x.shape
        else:
            return None
        return (_HCU_PAIR, placeholder, xq.dtype, xq.shape, xq.stride(), xq.device, xs.dtype, xs.shape, xs.stride(),
                xs.device)
    except RuntimeError:  # a nested tensor's sizes
        return None


class _BoundForward:
    """One QuantLinear call signature, checked once: the quantizer (plain-tensor input) and the GEMM,
    both bound, for the runtime generation they were bound in. A plain-tensor input goes straight to
    the GEMM where its provider quantizes it itself (``BoundGemm.from_float``: the same bits, one
    launch fewer for the host), except under CUDA graph capture, where only the GPU time counts: there
    only where the provider says it costs the GPU less too (``BoundGemm.float_captured``)."""

    __slots__ = ("generation", "form", "quant", "quantizer", "gemm", "pin", "tensors", "scale_version", "producing")

    def __init__(self, generation, form, quant, quantizer, gemm, pin, tensors, scale_version):
        self.generation, self.form, self.quant, self.gemm, self.pin = generation, form, quant, gemm, pin
        self.quantizer = quantizer  # the bound producer launch behind ``quant`` (plain-tensor input), or None
        self.tensors = tensors  # the layer's (weight, weight_scale, bias, input_scale) it was bound to
        self.scale_version = scale_version  # the input scale's version whose value was checked
        # linear_act_quant's bindings of this call: (act type, id of the consumer, numerics) -> _BoundProducing
        self.producing: dict = {}

    def current(self, buffers: dict) -> bool:
        """Bound to the layer's tensors still (a tensor put in place without setattr, as offloading
        hooks do through ``_buffers``, binds again), and the input scale not written in place since its
        value was checked (``copy_``, ``fill_``: the checked path checks it again)."""
        w, ws, b, s = self.tensors
        return (buffers["weight"] is w and buffers["weight_scale"] is ws and buffers["bias"] is b
                and buffers["input_scale"] is s
                and (s is None or (_version(s) == self.scale_version and not s.requires_grad))
                # a weight (FP8), weight scale or bias made to require grad in place: the checked path refuses it
                # where grad is on (read only then: serving runs without grad, and this is per call)
                and not (_grad_enabled() and (w.requires_grad or ws.requires_grad
                                              or (b is not None and b.requires_grad))))

    def __call__(self, x, pair):
        if self.form == _TENSOR:
            scale = self.tensors[3]  # the layer's input scale (``current`` saw it in place)
            gemm = self.gemm
            if gemm.from_float is not None and (gemm.float_captured or not capturing()):
                return gemm.quantizing(x, scale)  # one launch: the same bits as the two below
            q, s = self.quant(x, scale)
            return gemm(q, s)
        if self.form == _QUANTIZED:
            return self.gemm(x.data, x.scale)
        return self.gemm(pair[0], pair[1])


class QuantLinear(nn.Module):
    """A W8A8 linear (int8 or FP8, per-output-channel weight scales) that consumes ``input_key``."""

    def __init__(self, weight: torch.Tensor, weight_scale: torch.Tensor, input_key: K.QuantKey, *,
                 bias: torch.Tensor | None = None, input_scale: torch.Tensor | float | None = None,
                 out_dtype: torch.dtype = torch.bfloat16, name: str | None = None):
        super().__init__()
        self._bound: dict[tuple, _BoundForward] = {}
        # (weak reference, version) of the input_scale whose value was checked: a reference, so that a new
        # tensor that reuses a freed one's id is not taken for it; weak, so that it keeps no old scale alive
        self._scale_seen: tuple | None = None
        if name is not None and not isinstance(name, str):  # errors name the layer by it
            raise TypeError(f"QuantLinear: name must be a string or None, got {described(name)}")
        where = name or "QuantLinear"
        key = K.as_key(input_key, f"{where}: input_key")
        check_out_dtype(out_dtype, where)
        _check_weights(weight, weight_scale, bias, key, where)
        self.input_key = key
        self.out_dtype = out_dtype
        self.name = name or _default_name(weight.shape[-1], weight.shape[0])
        self.__dict__["_default_named"] = not name  # a default name follows the weight's shape
        # built from values, as the scales and bias are: a Parameter (or a tensor that requires grad) is held detached
        self.register_buffer("weight", weight.detach() if weight.requires_grad or isinstance(weight, nn.Parameter)
                             else weight)
        self.register_buffer("weight_scale", _held_scale(weight_scale.detach()))
        self.register_buffer("bias", None if bias is None else _held_bias(bias.detach(), out_dtype, where))
        self.register_buffer("input_scale", None)
        if K.is_static(key):
            if input_scale is None:
                raise ScaleError(f"{self.name}: static key {K.key_name(key)} needs input_scale")
            self.set_input_scale(input_scale)
        elif input_scale is not None:
            raise ScaleError(f"{self.name}: {K.key_name(key)} computes its scale per token; input_scale must be None")
        expose_input_quant_key(self, key)

    @classmethod
    def from_float(cls, linear: nn.Linear, input_key: K.QuantKey, input_scale: torch.Tensor | float | None = None,
                   *, name: str | None = None, fp8_dtype: torch.dtype | None = None) -> "QuantLinear":
        """Quantize ``linear``'s weight per output channel for ``input_key`` (int8 or FP8)."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_float expects torch.nn.Linear, got {type(linear).__name__}")
        where = name or "from_float"
        input_key = K.as_key(input_key, f"{where}: input_key")
        _check_initialized(linear, where, "from_float")
        if 0 in linear.weight.shape:
            raise ShapeMismatchError(f"{where}: nn.Linear({linear.in_features}, {linear.out_features}) has no weights "
                                     "to quantize; in_features and out_features must be > 0")
        if linear.weight.dtype not in ACT_DTYPES:  # the layer's output dtype is the linear's
            raise QuantDTypeError(f"{where}: from_float quantizes a bf16, fp16 or fp32 nn.Linear (its dtype becomes "
                                  f"the layer's output dtype), got a {linear.weight.dtype} one")
        if K.is_fp8(input_key):
            if fp8_dtype is None:
                from fused_quant.registry import platform_fp8_dtype

                fp8_dtype = platform_fp8_dtype()
            if fp8_dtype not in FP8_DTYPES:
                allowed = f"{', '.join(str(d) for d in FP8_DTYPES)} for key {K.key_name(input_key)}"
                if isinstance(fp8_dtype, torch.dtype) and fp8_dtype.is_floating_point and fp8_dtype.itemsize == 1:
                    # another FP8 format (e5m2): a value W8A8 here does not support
                    raise UnsupportedError(f"{where}: fp8_dtype {fp8_dtype} is an FP8 format no W8A8 key here "
                                           f"stores; the supported ones are {allowed}")
                raise QuantDTypeError(f"{where}: fp8_dtype must be an FP8 dtype, one of {allowed}; got {fp8_dtype}")
            wdtype = fp8_dtype
        else:
            if fp8_dtype is not None:
                raise QuantDTypeError(f"{where}: fp8_dtype is for FP8 keys; key {K.key_name(input_key)} has int8 "
                                      f"weights, got fp8_dtype={fp8_dtype}")
            wdtype = torch.int8
        wq, ws = quantize_weight_ref(linear.weight.detach(), wdtype)
        _check_float_weight(linear.weight, ws, where)
        # a weight that is a transposed view gives codes of its layout: the layer holds them row-major
        # the bias copied as the weight is: the layer never shares the float linear's memory
        bias = None if linear.bias is None else linear.bias.detach().clone()
        return cls(wq.contiguous(), ws, input_key, bias=bias, input_scale=input_scale, out_dtype=linear.weight.dtype,
                   name=name)

    def __setattr__(self, name: str, value) -> None:
        named = None  # for the name: whether one was given (else the default, which follows the weight's shape)
        if "input_key" in self.__dict__:  # built: what is set later is checked as it comes in
            if name == "input_key":
                raise UnsupportedError(f"{self.name}: input_key is fixed when a QuantLinear is built (the weights' "
                                       "format, the input scale and the producers that feed the layer follow from "
                                       "it); build a new layer for another key")
            if name == "out_dtype":
                if value not in ACT_DTYPES:  # (self.name is not there yet while the constructor sets it)
                    check_out_dtype(value, self.name)
                bias = self._buffers.get("bias")
                if bias is not None and bias.dtype != value:  # as .to(dtype) sets both
                    self._buffers["bias"] = _held_bias(bias, value, self.name)
            if name in _TENSORS:
                value = self._buffer_value(name, value)
            if name == "name":
                if value is not None and not isinstance(value, str):  # errors name the layer by it
                    raise TypeError(f"{self.name}: name must be a string or None, got {described(value)}")
                named = bool(value)
                if not named:  # no name: the default one, as the constructor gives
                    value = _default_name(self.weight.shape[-1], self.weight.shape[0])
        super().__setattr__(name, value)
        if named is not None:
            self.__dict__["_default_named"] = not named
        elif name == "weight" and self.__dict__.get("_default_named") and isinstance(value, torch.Tensor):
            self.__dict__["name"] = _default_name(value.shape[-1], value.shape[0])  # errors say the new shape
        if name in _BOUND_TO and "_bound" in self.__dict__:
            self._unbind()

    def __delattr__(self, name: str) -> None:
        if name in _TENSORS and "input_key" in self.__dict__:  # as ``layer.<name> = None``, checked the same way
            setattr(self, name, None)
            return
        super().__delattr__(name)

    def __prepare_scriptable__(self):
        raise UnsupportedError(f"{self.name}: torch.jit.script; {_NO_TORCHSCRIPT}")

    def _buffer_value(self, name: str, value):
        """A tensor set in place of one of the layer's buffers: kept a buffer (an ``nn.Parameter``, as loaders hand
        them, gives its tensor), never one that requires grad; a weight scale's values and an input scale checked."""
        if isinstance(value, nn.Parameter) and not value.requires_grad:
            value = value.detach()  # the same storage and version counter, a buffer's plain tensor
        if name == "input_scale":
            if isinstance(value, torch.Tensor):
                check_dense(value, f"{self.name}: input_scale (when assigned)")
            if isinstance(value, torch.Tensor) and value.numel() == 1 and value.shape != (1,):
                value = value.reshape(1)  # held as [1] on every way in (a view: in-place writes still reach it)
            self._check_input_scale(value, "when assigned")  # refuses one that requires grad too
            return value
        if isinstance(value, torch.Tensor) and value.requires_grad:
            raise UnsupportedError(f"{self.name}: {name} requires grad; QuantLinear is inference only and holds fixed "
                                   "tensors: set a plain tensor (t.detach()), or nn.Parameter(t, requires_grad=False)")
        if name == "weight":
            _check_weight(value, self.input_key, self.name)  # its N and K against the rest: at the next call
        if name == "weight_scale":
            if not isinstance(value, torch.Tensor):  # as for the weight: a layer has its scales
                raise TypeError(f"{self.name}: weight_scale must be a torch.Tensor, got {type(value).__name__}")
            check_dense(value, f"{self.name}: weight_scale")
            if not value.is_floating_point():
                raise QuantDTypeError(f"{self.name}: weight_scale must be floating point, got {value.dtype}")
            check_weight_scale_shape(value, None, layer=self.name)
            check_weight_scale_values(value, layer=self.name)
            value = _held_scale(value)  # as the constructor holds it
        if name == "bias" and value is not None:
            _check_bias(value, self.name)
            value = _held_bias(value, self.out_dtype, self.name)
        return value

    def _unbind(self) -> None:
        """Drop the bound calls (the layer's tensors or settings are set anew): calls bind again."""
        self.__dict__["_bound"] = {}
        self.__dict__["_swapped"] = None

    def __getstate__(self):
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        # bound calls hold kernels and closures: rebuilt on first use; a copy's scale has its own version
        # counter, so its value is checked again at its first use
        return {**state, "_bound": {}, "_swapped": None, "_scale_seen": None}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a copy into the quantized weight would cast: float weights would become codes of nothing (int8
        # truncates them to zeros), FP8 of the other format would change value; scales must be float
        metadata = args[0] if args else kwargs.get("local_metadata", {})
        # assign=True makes the state dict's tensors the layer's own (swap mode detaches them first): one that
        # requires grad is refused here by name; from __setattr__ torch would wrap the refusal in its RuntimeError.
        # A tensor the layer does not hold (a bias-less layer's bias) is left to torch: an unexpected key
        swap = torch.__future__.get_swap_module_params_on_conversion()
        if swap and self._buffers.get("input_scale") is not None and f"{prefix}input_scale" in state_dict:
            raise UnsupportedError(f"{self.name}: load_state_dict under torch.__future__'s swap mode "
                                   "(set_swap_module_params_on_conversion(True)) cannot swap a static input_scale: the "
                                   "layer keeps a weak reference to the scale it checked, and torch refuses to swap a "
                                   "tensor that has one; load with the swap mode off")
        if metadata.get("assign_to_params_buffers") and not swap:
            for name in _TENSORS:
                t = state_dict.get(f"{prefix}{name}")
                if isinstance(t, torch.Tensor) and t.requires_grad and self._buffers.get(name) is not None:
                    raise UnsupportedError(f"{self.name}: the state dict's {prefix}{name} requires grad, and "
                                           "load_state_dict(assign=True) would make it the layer's own tensor; "
                                           "QuantLinear is inference only and holds fixed tensors: load plain "
                                           "tensors (t.detach()), or nn.Parameter(t, requires_grad=False)")
            # checked before any is installed: torch assigns them one by one, and a refusal after the weight would
            # leave the layer half loaded
            after = {name: (t if isinstance(t := state_dict.get(f"{prefix}{name}"), torch.Tensor) else held).device
                     for name in _TENSORS if (held := self._buffers.get(name)) is not None}
            if len(set(after.values())) > 1:
                raise DeviceMismatchError(f"{self.name}: load_state_dict(assign=True) would leave the layer's tensors "
                                          f"on several devices: {', '.join(f'{n} on {d}' for n, d in after.items())}; "
                                          "load a state dict whose tensors share one device, or load without "
                                          "assign=True (a copy into the layer's own)")
        w, ws = state_dict.get(f"{prefix}weight"), state_dict.get(f"{prefix}weight_scale")
        if isinstance(w, torch.Tensor) and w.dtype != self.weight.dtype:
            raise QuantDTypeError(f"{self.name}: the state dict's {prefix}weight is {w.dtype}; this layer holds "
                                  f"{self.weight.dtype} quantized weights. Load a state dict of the same format, or "
                                  "build the layer from float weights with QuantLinear.from_float")
        if isinstance(w, torch.Tensor) and w.shape != self.weight.shape:  # torch's loader would report a size mismatch
            raise ShapeMismatchError(f"{self.name}: the state dict's {prefix}weight is [N, K] = {list(w.shape)}, this "
                                     f"layer's {list(self.weight.shape)}", layer=self.name, w_shape=w.shape)
        if isinstance(w, torch.Tensor) and metadata.get("assign_to_params_buffers"):  # becomes the layer's own
            _check_weight(w, self.input_key, f"{self.name}: the state dict's {prefix}weight (assign=True)")
        elif isinstance(w, torch.Tensor):  # copied into the layer's weight: its values are what the layer will hold
            check_dense(w, f"{self.name}: the state dict's {prefix}weight")
            check_weight_values(w, what=f"the state dict's {prefix}weight", layer=self.name)
        if isinstance(ws, torch.Tensor) and not ws.is_floating_point():
            raise QuantDTypeError(f"{self.name}: the state dict's {prefix}weight_scale is {ws.dtype}; weight scales "
                                  "are float (stored as float32)")
        if isinstance(ws, torch.Tensor):
            what = f"the state dict's {prefix}weight_scale"
            check_dense(ws, f"{self.name}: {what}")
            held = self.weight_scale
            check_weight_scale_shape(ws, None, what=what, layer=self.name)
            if ws.numel() != held.numel():  # torch's loader would report a size mismatch of the buffer
                raise ScaleError(f"{self.name}: {what} has {ws.numel()} element{'s' * (ws.numel() != 1)}, this layer "
                                 f"holds {held.numel()} ({'per channel' if held.numel() > 1 else 'per tensor'}); load "
                                 "a state dict of a layer with the same weight scales")
            check_weight_scale_values(ws, what=what, layer=self.name)
            if ws.shape != held.shape:  # [N] or [1, N]: the layer's [N, 1], as every other way in takes it
                state_dict[f"{prefix}weight_scale"] = ws.reshape(held.shape)
        bias = state_dict.get(f"{prefix}bias")
        # a layer without one: an unexpected key, as torch says; torch's loader reports a wrong shape
        if isinstance(bias, torch.Tensor) and self._buffers.get("bias") is not None:
            if not bias.is_floating_point():  # a copy would cast it (an int32 bias of 123456 becomes bf16 123392)
                raise QuantDTypeError(f"{self.name}: the state dict's {prefix}bias is {bias.dtype}; a bias is floating "
                                      f"point (held in the output dtype {self.out_dtype}), not cast")
            check_bias_values(bias, self.out_dtype, what=f"the state dict's {prefix}bias", layer=self.name)
        scale = state_dict.get(f"{prefix}input_scale")
        if isinstance(scale, torch.Tensor) and K.is_static(self.input_key):
            # before it is copied in: a refused value never takes the place of the layer's scale
            what = f"the state dict's {prefix}input_scale"
            check_dense(scale, f"{self.name}: {what}")
            if not scale.is_floating_point():
                raise QuantDTypeError(f"{self.name}: {what} is {scale.dtype}; a static scale is float (held as "
                                      "float32)")
            if scale.numel() != 1:
                raise ScaleError(f"{self.name}: {what} has shape {tuple(scale.shape)}; a static per-tensor scale has "
                                 "one element")
            held = scale.detach().to(torch.float32).reshape(1)  # as every other way in holds it: float32 [1]
            check_static_scale_value(held, what="input_scale (state dict)", layer=self.name)
            if held.dtype != scale.dtype or scale.shape != (1,):
                state_dict[f"{prefix}input_scale"] = held
        # before torch installs anything: assign=True puts new tensors in place, and a bound call's views of the
        # held ones would make torch's swap mode refuse to swap them (a tensor in use elsewhere), part-way through
        self._unbind()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        # assign=True installs the state dict's own tensors, of any float dtype and layout: those a copy would give
        ws, bias = self._buffers["weight_scale"], self._buffers["bias"]
        if ws.dtype != torch.float32 or not ws.is_contiguous():
            self._buffers["weight_scale"] = _held_scale(ws)
        if bias is not None and (bias.dtype != self.out_dtype or not bias.is_contiguous()):
            self._buffers["bias"] = _held_bias(bias, self.out_dtype, self.name)
        if self.input_scale is not None and f"{prefix}input_scale" in state_dict:
            self._check_input_scale(self.input_scale, "state dict")

    @classmethod
    def from_linears(cls, linears, input_key: K.QuantKey, input_scale=None, *, name: str | None = None,
                     fp8_dtype: torch.dtype | None = None, names=None) -> "QuantLinear":
        """One QuantLinear for several ``nn.Linear`` of the same input (e.g. gate and up of a gated MLP):
        their weights stacked along the output dim in order and quantized per output channel (each
        row's scale is its own, as if quantized apart), biases stacked (all or none). A static key's
        ``input_scale`` may be one scale (a number or a one-element tensor) or one per linear (a list or tuple, or
        a tensor of as many elements as linears); the layer takes their max (as vLLM does when it merges layers),
        so no input clips more than in any of them. ``names``: what errors about
        one linear's weights call it (default ``linears[i]``), with its own output channels."""
        linears = list(linears) if isinstance(linears, (list, tuple)) else linears
        if not isinstance(linears, list) or not linears or not all(isinstance(m, nn.Linear) for m in linears):
            got = type(linears).__name__ if not isinstance(linears, list) else [type(m).__name__ for m in linears]
            raise TypeError(f"{name or 'from_linears'}: expects a non-empty list of torch.nn.Linear, got {got}")
        for m in linears:
            _check_initialized(m, name or "from_linears", "from_linears")
        if names is None:
            names = [f"{name or 'from_linears'}: linears[{i}]" for i in range(len(linears))]
        elif not (isinstance(names, (list, tuple)) and len(names) == len(linears) and all(isinstance(n, str)
                                                                                          for n in names)):
            raise TypeError(f"{name or 'from_linears'}: names must be one string per linear ({len(linears)}), got "
                            f"{names!r}")
        k = {m.in_features for m in linears}
        if len(k) != 1:
            raise ShapeMismatchError(f"{name or 'from_linears'}: the linears must share in_features, got "
                                     f"{[m.in_features for m in linears]}")
        has_bias = {m.bias is not None for m in linears}
        if len(has_bias) != 1:
            raise ShapeMismatchError(f"{name or 'from_linears'}: either every linear has a bias or none has")
        if isinstance(input_scale, torch.Tensor) and len(linears) > 1 and input_scale.numel() == len(linears):
            input_scale = list(input_scale.reshape(-1).unbind())  # one per linear, as a list of them reads
        if isinstance(input_scale, (list, tuple)):
            if len(input_scale) != len(linears):
                raise ScaleError(f"{name or 'from_linears'}: {len(input_scale)} input scales for "
                                 f"{len(linears)} linears")
            where = name or "from_linears"
            scales = [_scale_tensor(s, f"input_scale[{i}]", where) for i, s in enumerate(input_scale)]
            for i, s in enumerate(scales):
                check_static_scale_value(s, what=f"input_scale[{i}]", layer=where)
            on_meta = [s.device.type == "meta" for s in scales]
            if all(on_meta):  # deferred initialization: no values yet, the layer's scale comes with its state dict
                input_scale = scales[0]
            elif any(on_meta):
                raise DeviceMismatchError(f"{where}: the input scales are on meta (no value to take the largest of) "
                                          f"and on other devices, got {[str(s.device) for s in scales]}; pass them "
                                          "all on one kind of device, or one scale")
            else:
                input_scale = max(float(s) for s in scales)
        dtypes, devices = {m.weight.dtype for m in linears}, {m.weight.device for m in linears}
        if len(dtypes) != 1 or len(devices) != 1:  # the merged layer's output dtype and device would be a guess
            raise (QuantDTypeError if len(dtypes) != 1 else DeviceMismatchError)(
                f"{name or 'from_linears'}: the linears must share a dtype and a device, got "
                f"{[(str(m.weight.dtype), str(m.weight.device)) for m in linears]}")
        for m, part in zip(linears, names):  # a non-finite weight named in its own linear, not the merged rows
            w = m.weight.detach()
            if w.numel() and w.device.type != "meta" and not bool(torch.isfinite(w).all()):
                _check_float_weight(w, w.abs().amax(dim=1), part)
        merged = nn.Linear(k.pop(), sum(m.out_features for m in linears), bias=has_bias.pop(),
                           device=devices.pop(), dtype=dtypes.pop())
        with torch.no_grad():
            merged.weight.copy_(torch.cat([m.weight.detach() for m in linears]))
            if merged.bias is not None:
                merged.bias.copy_(torch.cat([m.bias.detach() for m in linears]))
        return cls.from_float(merged, input_key, input_scale, name=name, fp8_dtype=fp8_dtype)

    def _apply(self, fn, recurse=True):
        """``.to(device)`` moves everything; ``.to(dtype)`` sets the output dtype and the bias's,
        but never casts the quantized weight or the float32 scales (they would lose their meaning)."""
        self._unbind()
        probe = fn(torch.empty(0, dtype=self.out_dtype))
        out_dtype = probe.dtype if probe.dtype in ACT_DTYPES else self.out_dtype  # e.g. .double(): keep
        if probe.dtype.is_floating_point and probe.dtype not in ACT_DTYPES:
            warnings.warn(f"{self.name}: QuantLinear outputs bf16, fp16 or fp32; .to({probe.dtype}) keeps its "
                          f"{self.out_dtype} output (its weights and scales are never cast)", stacklevel=3)
        keep = {name: buf for name, buf in self._buffers.items() if buf is not None}
        if "bias" in keep and out_dtype != keep["bias"].dtype:  # before anything moves: refused, the layer is as it was
            check_bias_values(keep["bias"], out_dtype, layer=self.name)
        super()._apply(fn, recurse)
        for name, old in keep.items():
            new = self._buffers[name]
            want = out_dtype if name == "bias" else old.dtype
            if new.dtype != want:  # the bias from its new dtype where that is an output dtype, else from its old
                src = new if name == "bias" and new.dtype in ACT_DTYPES else old
                self._buffers[name] = src.to(device=new.device, dtype=want)
        self.out_dtype = out_dtype
        return self

    @property
    def in_features(self) -> int:
        return self.weight.shape[1]

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]

    def set_input_scale(self, scale: torch.Tensor | float) -> None:
        """Set the static input scale (a copy on the weight's device); its value is checked here once
        (finite, >= ``validation.MIN_STATIC_SCALE``), never per call. None is what ``layer.input_scale = None``
        is (a per-token key's; a static key's refusal)."""
        if scale is None:
            self.input_scale = None
            return
        scale = _scale_tensor(scale, "input_scale", self.name)
        if scale.device.type == "meta" and self.weight.device.type != "meta":
            raise DeviceMismatchError(f"{self.name}: input_scale is on the meta device (no value) but the weights "
                                      f"are on {self.weight.device}; pass a real scale, or build the layer on meta")
        self.input_scale = scale.detach().reshape(1).to(self.weight.device).clone()

    def _check_input_scale(self, scale: object, how: str) -> None:
        """Every way a static input scale comes in (attribute, set_input_scale, state dict, first call
        after ``to_empty``): metadata, then the value once per tensor and version."""
        if not K.is_static(self.input_key):
            if scale is not None:
                raise ScaleError(f"{self.name}: {K.key_name(self.input_key)} computes its scale per token; "
                                 f"input_scale must be None ({how})")
            return
        check_scale_tensor(scale, device=self.weight.device, what=f"input_scale ({how})", layer=self.name)
        if scale.requires_grad:  # e.g. an nn.Parameter: the dequantization would pass it a gradient of nothing
            raise UnsupportedError(f"{self.name}: input_scale ({how}) requires grad; QuantLinear is inference only "
                                   "and its static scale a fixed value: set a plain tensor (set_input_scale detaches "
                                   "one), or nn.Parameter(scale, requires_grad=False)")
        check_static_scale_value(scale, what=f"input_scale ({how})", layer=self.name)
        self._scale_seen = (weakref.ref(scale), _version(scale))

    def _checked_version(self, scale: torch.Tensor) -> int | None:
        """The version of ``scale`` whose value was checked; None where this tensor's value never was."""
        seen = self._scale_seen
        return seen[1] if seen is not None and seen[0]() is scale else None

    def forward(self, x: torch.Tensor | QuantizedActivation | None = None,
                x_and_scale_quanted: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """In eager mode a call whose input has the metadata of an earlier checked call (same form,
        dtypes, shapes, strides, devices) runs that call's bound quantizer and GEMM directly, in the
        same runtime generation and with the same weight, scale and bias tensors; the checks read
        metadata only, so they would pass again. Values may change in place (``copy_``,
        ``load_state_dict``): a static input scale written in place is checked again at the next eager
        call, by its version counter (not for writes that bypass it, such as ``scale.data.copy_()``,
        nor for inference-mode tensors, which have none; not while a CUDA graph is captured or
        replayed, nor under torch.compile). Values written in place into the weight, weight scale or bias
        are not checked again (they were checked where they came in). A tensor's storage or shape changed in place
        (``.data = ...``, ``t_()``) is not seen, and a bound call may then mix the new tensor with the others'
        old views: assign a new tensor instead, or call ``fused_quant.reset()``."""
        if torch.compiler.is_compiling():
            return self._checked_forward(x, x_and_scale_quanted, None)
        if _tracing_state() is not None:
            raise UnsupportedError(f"{self.name}: called under torch.jit.trace; {_NO_TORCHSCRIPT}")
        sig = _signature(x, x_and_scale_quanted)
        bound = self._bound.get(sig) if sig is not None else None
        if bound is not None and bound.generation == runtime.generation() and bound.current(self._buffers):
            return bound(x, x_and_scale_quanted)
        return self._checked_forward(x, x_and_scale_quanted, sig)

    def _checked_forward(self, x, pair, sig: tuple | None) -> torch.Tensor:
        # one reading of the layer's tensors and bound calls: what this call computes with is what it binds to,
        # whatever another thread sets meanwhile (a binding of tensors replaced since is never filed)
        generation, table, buffers = runtime.generation(), self._bound, self._buffers
        tensors = weight, weight_scale, bias, scale = tuple(buffers[name] for name in _TENSORS)
        inputs = (("x", x.data), ("x scale", x.scale)) if isinstance(x, QuantizedActivation) else (("x", x),)
        if isinstance(pair, (tuple, list)):
            inputs += tuple(("x_and_scale_quanted", t) for t in pair)
        # tensors of the layer made to require grad in place (requires_grad_())
        inputs += (("weight", weight), ("weight_scale", weight_scale), ("bias", bias), ("input_scale", scale))
        grads = needing_grad(inputs)
        if grads:
            raise UnsupportedError(f"{self.name}: QuantLinear is inference only (its quantized forward has no "
                                   f"gradient), and its {', '.join(grads)} require(s) grad; run it under "
                                   "torch.no_grad() / torch.inference_mode(), or detach them")
        if scale is not None and not torch.compiler.is_compiling():
            checked = self._checked_version(scale)
            if checked != _version(scale) and not _no_sync_now(scale):
                # e.g. after to_empty() (values nobody checked) or a copy_ into the scale
                self._check_input_scale(scale, "first use" if checked is None else "changed in place")
        self._check_outputs_agree(weight, weight_scale, bias)
        qa = self._activation(x, pair, scale)
        out = quant_gemm(qa, weight, weight_scale, bias, out_dtype=self.out_dtype, layer=self._call_name())
        if sig is not None and self.__dict__.get("_swapped") is not table:
            self._bind(sig, generation, table, tensors, x, qa)
        return out

    def _bind(self, sig: tuple, generation: int, table: dict, tensors: tuple, x, qa: QuantizedActivation) -> None:
        """Bind this call's quantizer and GEMM for its signature (after its checks passed) to ``tensors``, into
        ``table`` (the layer's bound calls when the call began). A layer whose tensors were replaced without
        ``setattr`` while a call was bound to them (offloading hooks writing ``_buffers``, which move a layer's
        tensors in before each call and out after it) binds no more: a bound call would keep the tensors it was
        bound to alive, and each call takes the checked path until the layer's tensors are set again."""
        # against every call bound in this generation, not only this signature's: offloading hooks with token counts
        # that vary would otherwise bind each count to another moved-in copy, and keep them all alive
        if any(bound.generation == generation and any(a is not b for a, b in zip(bound.tensors, tensors))
               for bound in list(table.values())):
            table.clear()
            # the table is marked, not the layer: a setattr meanwhile (another thread), even between a look at the
            # layer's table and this mark, gave the layer a new table and tensors set as they should be, which bind
            # again
            self.__dict__["_swapped"] = table
            return
        # after a reset: drop every call bound before it, whatever its signature (over a copy, and each key dropped
        # once: another thread may file or drop bound calls meanwhile)
        for stale in [s for s, bound in list(table.items()) if bound.generation != generation]:
            table.pop(stale, None)
        weight, weight_scale, bias, scale = tensors
        quant = quantizer = None
        if sig[0] == _TENSOR:
            from fused_quant.registry import bind_fused_act_quant

            call = bind_fused_act_quant("identity", x, self.input_key, scale)
            if call is None:  # the producer has no bound form: this signature keeps the checked path
                return
            quant, quantizer = call.tensors, call.fn
        gemm = bind_gemm(qa.data, qa.scale, weight, weight_scale, bias, self.out_dtype,
                         self.input_key, self.name, quantizer=quantizer)
        if gemm is not None and generation == runtime.generation():
            if len(table) >= MAX_BOUND:
                table.clear()
            pin = x.quant_key if sig[0] == _QUANTIZED else None  # keeps the key whose id is in sig alive
            # the version whose value was checked (not one first seen under capture, where it is not)
            version = self._checked_version(scale) if scale is not None else None
            table[sig] = _BoundForward(generation, sig[0], quant, quantizer, gemm, pin, tensors, version)

    def _call_name(self) -> str | None:
        """The name a call's checks and GEMM carry where they pass: none under torch.compile, where a string read
        from the layer is a constant of the graph, guarded by value, so that each layer of a model compiled block by
        block would compile again (and past torch's recompile limit run eager, or fail under ``fullgraph``). The
        GEMM's shape and operand checks met there name no layer; the same call in eager names it."""
        return None if torch.compiler.is_compiling() else self.name

    def _check_outputs_agree(self, weight, weight_scale, bias) -> None:
        """The layer's N, where its tensors were assigned one at a time (a loader's way): a weight of another N than
        its scales and bias is named as that, not as a scale of the wrong length."""
        n = weight.shape[0]
        held = [f"weight_scale {weight_scale.numel()} scales"] if weight_scale.numel() not in (1, n) else []
        held += [f"bias {bias.shape[0]} values"] if bias is not None and bias.shape[0] != n else []
        if held:
            raise ShapeMismatchError(f"{self.name}: the weight has N={n} output channels, its {' and '.join(held)}; "
                                     "assign a layer's weight, weight_scale and bias together", layer=self.name, n=n)

    def _activation(self, x, x_and_scale_quanted, scale=_MISSING) -> QuantizedActivation:
        """The call's quantized activation; a plain tensor quantized with ``scale`` (default: the layer's)."""
        if x_and_scale_quanted is not None:
            return self._from_hcu_tuple(x, x_and_scale_quanted)
        if x is None:
            raise TypeError(f"{self.name}: pass x (a tensor or QuantizedActivation) or x_and_scale_quanted=(xq, xs)")
        if not isinstance(x, (torch.Tensor, QuantizedActivation)):
            if isinstance(x, torch.fx.Proxy):
                raise UnsupportedError(f"{self.name}: {_NO_FX}")
            raise TypeError(f"{self.name}: x must be a tensor or QuantizedActivation, got {type(x).__name__}")
        try:
            qa = as_quantized_activation(x, self.input_key)
        except QuantKeyMismatchError as exc:
            raise QuantKeyMismatchError(f"{self.name}: {exc}") from None
        if qa is not None:
            return qa
        check_plain_input_dtype(x, self.input_key, self.name)
        check_activation_k(x, self.weight, self._call_name())  # before its quantization, which would name no layer
        if x.device != self.weight.device:  # as well: a static scale's device would be named, not the layer's
            raise DeviceMismatchError(f"{self.name}: weight is on {self.weight.device}, activation on {x.device}")
        from fused_quant.registry import platform_fp8_dtype, quantize

        if K.is_fp8(self.input_key) and self.weight.dtype != platform_fp8_dtype():
            raise QuantDTypeError(f"{self.name}: this node quantizes activations to {platform_fp8_dtype()}, the "
                                  f"layer's weights are {self.weight.dtype}: a plain input cannot run here (build "
                                  "the layer with this node's FP8 dtype: from_float's default)")

        return quantize(x, self.input_key, self.input_scale if scale is _MISSING else scale)

    def _from_hcu_tuple(self, placeholder, pair) -> QuantizedActivation:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(t, torch.Tensor) for t in pair)):
            got = (f"({', '.join(type(t).__name__ for t in pair)})" if isinstance(pair, (tuple, list))
                   else type(pair).__name__)
            raise TypeError(f"{self.name}: x_and_scale_quanted must be a (xq, xs) pair of tensors, got {got}")
        xq, xs = pair
        if xq.dtype == torch.float32 and xs.dtype != torch.float32:
            raise QuantDTypeError(f"{self.name}: x_and_scale_quanted is (xq, xs), the quantized activation then its "
                                  f"float32 scale; got ({xq.dtype} {tuple(xq.shape)}, {xs.dtype} {tuple(xs.shape)}): "
                                  "the two are swapped")
        if isinstance(placeholder, QuantizedActivation):
            raise TypeError(f"{self.name}: pass either a QuantizedActivation or x_and_scale_quanted, not both")
        if placeholder is not None:
            if not isinstance(placeholder, torch.Tensor):
                raise TypeError(f"{self.name}: placeholder x must be a tensor or None, got {type(placeholder).__name__}")
            # the placeholder's values are ignored, but it must describe the same tokens as xq
            if xq.dim() == 0 or placeholder.dim() == 0 or placeholder.shape[:-1] != xq.shape[:-1]:
                raise ShapeMismatchError(
                    f"{self.name}: token-count mismatch: placeholder x has shape {tuple(placeholder.shape)} "
                    f"but xq has {tuple(xq.shape)}; their leading (token) dims must be equal",
                    layer=self.name, x_shape=xq.shape, w_shape=self.weight.shape)
        return QuantizedActivation(data=xq, scale=xs, orig_dtype=self.out_dtype, orig_shape=xq.shape,
                                   quant_key=self.input_key)

    def extra_repr(self) -> str:
        return (f"name={self.name!r}, in_features={self.in_features}, out_features={self.out_features}, "
                f"input_key={K.key_name(self.input_key)}, weight={self.weight.dtype}, out_dtype={self.out_dtype}, "
                f"bias={self.bias is not None}")


class _BoundProducing:
    """A bound QuantLinear call (``_BoundForward``) whose GEMM applies the next layer's bound producer
    (``registry._BoundCall`` of a silu_and_mul of a per-tensor key) to its output: ``call(xq, xs, scale)``, and
    ``float_call(x, x_scale, scale)`` for a plain-tensor input quantized in the kernel too (or None). ``call``
    None: the two calls run (no provider binds one for this producer)."""

    __slots__ = ("forward", "producer", "call", "float_call", "float_captured", "key", "scale", "lead", "want",
                 "checked")

    def __init__(self, forward, producer, call, float_call, key, scale, lead, want):
        self.forward, self.producer, self.call, self.float_call = forward, producer, call, float_call
        self.float_captured = getattr(float_call, "under_capture", False) is True
        self.key, self.scale = key, scale  # the consumer's key object and static scale it was bound for
        self.lead = lead  # the output's leading dims where they are not [M] (a view), else None
        self.want = want  # (shape, dtype) of the producer's q in the two calls it was bound after
        self.checked = False  # the first output's checked against ``want``

    def current(self, consumer: nn.Module) -> bool:
        key = get_input_quant_key(consumer)
        return key is self.key and getattr(consumer, "input_scale", None) is self.scale

    def __call__(self, x) -> QuantizedActivation:
        forward, scale = self.forward, self.scale
        if forward.form == _TENSOR:
            float_call = self.float_call
            if float_call is not None and (self.float_captured or not capturing()):
                q = float_call(x, forward.tensors[3], scale)
            else:
                q = self.call(*forward.quant(x, forward.tensors[3]), scale)
        else:
            q = self.call(x.data, x.scale, scale)
        if self.lead is not None:
            q = q.view(*self.lead, q.shape[-1])
        if not self.checked:
            self._check(q)
        self.producer.counted()
        return self.producer.wrap(q, scale)

    def _check(self, q) -> None:
        """The first output has the shape and dtype of the producer's in the two calls (a provider's contract)."""
        want = self.want
        if not isinstance(q, torch.Tensor) or (tuple(q.shape), q.dtype) != want:
            got = f"{tuple(q.shape)} {q.dtype}" if isinstance(q, torch.Tensor) else type(q).__name__
            raise GemmProviderError(f"{self.forward.gemm.layer}: GEMM provider {self.forward.gemm.provider.name}'s "
                                    f"producing call returned {got}, expected {want[0]} {want[1]}")
        self.checked = True


def linear_act_quant(linear: nn.Module, x, act_fn: nn.Module, consumer: nn.Module | None, *,
                     numerics: str | None = None):
    """``maybe_fused_act_quant(act_fn, linear(x), consumer, numerics=numerics)``: the same result, bit for bit,
    and in one kernel where the linear's GEMM can apply the consumer's producer to its output (model code
    calls it unconditionally, as it would the two calls).

    That is the case in eager calls (from the third with an input's metadata: the first binds the layer's call,
    the second the producer's) where the linear is a QuantLinear without forward hooks whose GEMM is the
    small-M one with one K split, and the producer that ``maybe_fused_act_quant`` runs is the package's Triton
    silu_and_mul of a per-tensor key (FP8 or int8 static): the GEMM's epilogue computes the output, the
    activation and the quantization as the two calls would, and stores only the quantized activation. A
    plain-tensor ``x`` is quantized in the same kernel where the layer's own calls do that. Under CUDA graph
    capture too; under torch.compile the two calls."""
    if not isinstance(linear, nn.Module):
        raise TypeError(f"linear_act_quant: linear must be the linear module, got {described(linear)}; "
                        "the arguments are (linear, x, act_fn, consumer)")
    bound = None
    if type(linear) is QuantLinear and not torch.compiler.is_compiling() and _tracing_state() is None:
        sig = _signature(x, None)  # (under torch.jit.trace the layer's own call refuses it)
        bound = linear._bound.get(sig) if sig is not None else None
        if bound is not None and bound.generation == runtime.generation() and bound.current(linear._buffers):
            fused = bound.producing.get((type(act_fn), id(consumer), numerics))
            if fused is not None and fused.current(consumer):
                if hooked(linear) or hooked(act_fn):  # the calls run their hooks
                    return maybe_fused_act_quant(act_fn, linear(x), consumer, numerics=numerics)
                if fused.call is None:  # the two calls, the layer's through the bound call its forward would run
                    return maybe_fused_act_quant(act_fn, bound(x, None), consumer, numerics=numerics)
                return fused(x)
        else:
            bound = None
    h = linear(x)
    out = maybe_fused_act_quant(act_fn, h, consumer, numerics=numerics)
    if bound is not None and type(out) is QuantizedActivation:
        _bind_producing(bound, act_fn, h, consumer, numerics, (tuple(out.data.shape), out.data.dtype))
    return out


def _bind_producing(bound: _BoundForward, act_fn: nn.Module, h: torch.Tensor, consumer: nn.Module,
                    numerics: str | None, want: tuple) -> None:
    """File ``linear_act_quant``'s one-kernel call for this bound call, act type, consumer and numerics where the
    GEMM provider binds one (``GemmProvider.bind_producing``) for the producer that just ran; else a record that
    it runs the two calls (kept while the consumer's key and scale are the ones seen, as a bound call)."""
    producer = bound_maybe_call(act_fn, h, consumer, numerics)
    gemm = bound.gemm
    bind_producing = gemm.provider.bind_producing
    call = float_call = None
    # a plain tensor needs the layer's quantizer; the HCU pair's form is never bound here
    if (producer is not None and bind_producing is not None and bound.form != _HCU_PAIR
            and (bound.form != _TENSOR or bound.quantizer is not None)):
        w, ws, bias, _ = bound.tensors
        ws2 = ws.reshape(-1, 1)
        call = bind_producing(gemm.problem, w, ws2, bias, producer.fn)
        if call is not None and bound.form == _TENSOR:
            float_call = bind_producing(gemm.problem, w, ws2, bias, producer.fn, bound.quantizer)
    lead = None if h.dim() == 2 else tuple(h.shape[:-1])
    if len(bound.producing) >= MAX_BOUND:  # consumers come and go (keyed by id): start over
        bound.producing.clear()
    bound.producing[(type(act_fn), id(consumer), numerics)] = _BoundProducing(
        bound, producer, call, float_call, get_input_quant_key(consumer), getattr(consumer, "input_scale", None), lead,
        want)


def name_quant_linears(model: nn.Module, prefix: str = "") -> None:
    """Name every QuantLinear in ``model`` after its module path, so errors say which layer."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"name_quant_linears: model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"name_quant_linears: prefix must be a string, got {described(prefix)}")
    for path, module in model.named_modules(prefix=prefix):
        if isinstance(module, QuantLinear):
            module.name = path or module.name
