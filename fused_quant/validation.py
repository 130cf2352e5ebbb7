"""Every input check of the library (and, re-exported, the error types they raise).

Per-call checks read metadata only (dtype, rank, shape, device, strides): no
host-device sync, so they are CUDA-graph safe. Values of static scales are
checked once, when a scale is set (``check_static_scale_value``). Nothing here
uses ``assert``: ``python -O`` must not change what is accepted.
"""

from __future__ import annotations

import inspect
import math
import numbers
import reprlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fused_quant import keys as K
from fused_quant.activations import ACTIVATIONS
from fused_quant.errors import (  # noqa: F401  (re-exported: the checks and their errors in one place)
    FusedQuantError,
    ShapeMismatchError,
    QuantDTypeError,
    BackendUnavailableError,
    ScaleError,
    BiasError,
    DeviceMismatchError,
    LayoutError,
    QuantKeyMismatchError,
    NumericsProfileError,
    UnsupportedError,
    GemmProviderError,
    ProducerError,
)

ACT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
FP8_DTYPES = K.FP8_DTYPES


def _where(layer: str | None) -> str:
    return f"{layer}: " if layer else ""


def check_tensor(x: object, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    return x


def described(value: object) -> str:
    """A value that came in the wrong place, for an error: its type, and a tensor's shape (its values can run to
    thousands of characters: a swapped argument's), anything else's short repr."""
    if isinstance(value, torch.Tensor):
        return f"{type(value).__name__} of shape {list(value.shape)}"
    return f"{type(value).__name__} {reprlib.repr(value)}"


def check_out_dtype(value: object, where: str) -> None:
    """An output dtype, everywhere one comes in (a layer built, its ``out_dtype`` set, the checked GEMM): a
    torch.dtype (its name is a TypeError saying so: "got bfloat16" read as a refused bfloat16), one of ACT_DTYPES."""
    if not isinstance(value, torch.dtype):
        raise TypeError(f"{where}: output dtype must be a torch.dtype (torch.bfloat16, torch.float16 or "
                        f"torch.float32), got {described(value)}")
    if value not in ACT_DTYPES:
        raise QuantDTypeError(f"{where}: output dtype must be torch.bfloat16, torch.float16 or torch.float32, got "
                              f"{value}")


def check_dense(x: torch.Tensor, what: str) -> None:
    """A dense (strided) tensor: the kernels read memory by strides, which sparse and nested tensors do not have."""
    if x.layout is not torch.strided or x.is_nested:
        got = "a nested tensor" if x.is_nested else f"layout {x.layout}"
        raise LayoutError(f"{what} must be a dense (strided) tensor, got {got}; pass t.to_dense()"
                          + (" (or one tensor per sequence)" if x.is_nested else ""))


def check_takes(fn: Callable | None, who: str, call: str, *args, **kwargs) -> None:
    """A function the package will call as ``fn(*args, **kwargs)`` (``call`` names the arguments) is refused when it
    is registered if it cannot take them, not at its first call inside a model. One without a signature to read (a
    builtin) passes: its first call tells."""
    if fn is None:
        return
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{who} must take {call}, got {getattr(fn, '__qualname__', fn)}{signature}: {exc}") from None


def check_activation(act: str) -> str:
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise UnsupportedError(f"unknown activation {act!r}; expected one of {', '.join(ACTIVATIONS)}")
    return act


def check_activation_input(x: torch.Tensor, act: str) -> None:
    """dtype in {bf16, fp16, fp32}, rank >= 1, and an even last dim for silu_and_mul."""
    check_tensor(x, f"{act} input")
    check_dense(x, f"{act} input")
    if x.dtype not in ACT_DTYPES:
        raise QuantDTypeError(
            f"{act} input must be one of bfloat16, float16, float32; got {x.dtype} "
            f"(already-quantized or integer tensors cannot be activated)"
        )
    if x.dim() == 0:
        raise ShapeMismatchError(f"{act} input must have rank >= 1 (tokens x features); got a 0-d tensor")
    if x.shape[-1] == 0:
        raise ShapeMismatchError(f"{act} input's last dim (features) must be > 0; got shape {tuple(x.shape)}",
                                 x_shape=x.shape)
    if x.shape[-1] % ACTIVATIONS[act].width_factor != 0:
        raise ShapeMismatchError(
            f"silu_and_mul input's last dim holds [gate | up] and must be even; got {x.shape[-1]} "
            f"(shape {tuple(x.shape)})",
            x_shape=x.shape,
        )


def check_scale_tensor(scale: object, *, device: torch.device, what: str = "static scale",
                       layer: str | None = None) -> torch.Tensor:
    """Metadata of a per-tensor scale: float32, one element, on ``device``."""
    if not isinstance(scale, torch.Tensor):
        # FusedQuantErrors both: a missing scale a ScaleError, another type a QuantDTypeError (a TypeError)
        error, hint = QuantDTypeError, ""
        if scale is None:
            error, hint = ScaleError, " (a static key needs its scale)"
        elif isinstance(scale, numbers.Real) and not isinstance(scale, bool):  # Python and numpy numbers
            try:
                hint = f"; e.g. torch.tensor([{float(scale)!r}], dtype=torch.float32, device='{device}')"
            except OverflowError:  # an int past float's range
                hint = f" ({reprlib.repr(scale)}, past float32's range)"
        raise error(f"{_where(layer)}{what} must be a one-element float32 torch.Tensor on {device}, got "
                    f"{type(scale).__name__}{hint}")
    check_dense(scale, f"{_where(layer)}{what}")
    if scale.dtype != torch.float32:
        raise QuantDTypeError(f"{_where(layer)}{what} must be float32, got {scale.dtype}")
    if scale.numel() != 1:
        raise ScaleError(
            f"{_where(layer)}{what} must have exactly 1 element, got {scale.numel()} (shape {tuple(scale.shape)})"
        )
    if scale.device != device:
        raise DeviceMismatchError(f"{_where(layer)}{what} is on {scale.device}, expected {device}")
    return scale


# The smallest static scale: the smallest normal float32, whose reciprocal (what quantizing divides
# by, and what the kernels may multiply by) is finite; below it 1 / scale is +Inf and q = x / scale NaN at 0.
MIN_STATIC_SCALE = torch.finfo(torch.float32).tiny


def check_static_scale_value(scale: torch.Tensor, *, what: str = "static scale",
                             layer: str | None = None) -> None:
    """Once, when a static scale is set: finite and >= MIN_STATIC_SCALE (this reads the value: a
    host-device sync, never per call).

    A scale on the meta device has no value (a layer built for deferred initialization);
    it is accepted here, and the real value is checked when it is set on a real device.
    """
    if scale.device.type == "meta":
        return
    value = float(scale.detach().reshape(-1)[0].item())
    if not (MIN_STATIC_SCALE <= value < float("inf")):
        raise ScaleError(f"{_where(layer)}{what} must be finite and >= {MIN_STATIC_SCALE:.8g} (the smallest "
                         f"normal float32: its reciprocal is finite), got {value!r}")


def needing_grad(tensors) -> list[str]:
    """The names of ``tensors`` (``(name, tensor or other)`` pairs) that require grad while grad is enabled; none
    under ``torch.no_grad()`` / ``inference_mode``. The inference-only calls (producers, GEMMs, QuantLinear) refuse
    them rather than return an output without a gradient, which would cut the graph silently."""
    if not torch.is_grad_enabled():
        return []
    return [name for name, t in tensors if isinstance(t, torch.Tensor) and t.requires_grad]


def check_weight_scale_values(ws: torch.Tensor, *, what: str = "weight_scale", layer: str | None = None) -> None:
    """Once, when weight scales come in (a layer built or loaded, a scale set): every value finite and >= 0 (a zero
    row's scale is 0) as the float32 a layer holds and the kernels read: a wider scale that overflows float32, or
    is not 0 and underflows to it, is refused too. Reads the values: a host-device sync, never per call; meta
    tensors have none to read."""
    if ws.device.type == "meta" or ws.numel() == 0:
        return
    flat = ws.detach().reshape(-1)
    held = flat.to(torch.float32)
    bad = ~(torch.isfinite(held) & (held >= 0)) | ((held == 0) & (flat != 0))
    if bad.any():
        row = int(bad.nonzero()[0, 0])
        got = f"{float(flat[row])!r}" + ("" if flat.dtype == torch.float32 else f" ({float(held[row])!r} as float32)")
        raise ScaleError(f"{_where(layer)}{what}: weight scales must be finite and >= 0 in float32, got {got} "
                         f"for output channel {row} ({int(bad.sum())} such values)")


# the bytes that are NaN in each FP8 format: e4m3fn S.1111.111 (0x7f, 0xff), e4m3fnuz 0x80 (its one NaN)
_FP8_NAN_BITS = {torch.float8_e4m3fn: (0x7F, 0xFF), torch.float8_e4m3fnuz: (0x80,)}


def check_weight_values(w: torch.Tensor, *, what: str = "weight", layer: str | None = None) -> None:
    """Once, when quantized weights come in (a layer built, assigned or loaded, a checkpoint read): FP8 weights hold
    no NaN code, which would make its output channel NaN for every token (int8 has none). Reads the values: a
    host-device sync, never per call; meta tensors have none to read."""
    nan_bits = _FP8_NAN_BITS.get(w.dtype)
    if nan_bits is None or w.device.type == "meta" or w.numel() == 0:
        return
    b = w.detach().view(torch.uint8)
    # one reduction where the weight has none: 0x80 is int8's least value, 0x7f the most of the low seven bits
    if (int(b.view(torch.int8).amin()) > -128) if 0x80 in nan_bits else (int((b & 0x7F).amax()) < 0x7F):
        return
    bad = sum(b == code for code in nan_bits)
    if bad.any():
        at = [int(i) for i in bad.nonzero()[0]]  # [row, column] of a weight [N, K]
        raise UnsupportedError(f"{_where(layer)}{what}: {w.dtype} weights must not hold NaN, got NaN at {at} "
                               f"({int(bad.sum())} such values): output channel {at[0]} would be NaN for every "
                               "token")


def check_weight_scale_shape(ws: torch.Tensor, n: int | None, *, what: str = "weight_scale",
                             layer: str | None = None) -> None:
    """A weight scale's shape, the one rule on every way one comes in (a layer built, assigned or loaded, a
    checkpoint, the checked GEMM entry): one scale per output channel along one dim (``[N]``, ``[N, 1]``, ``[1, N]``,
    ...) or one element; not a grid such as ``[N / 2, 2]``, whose flattening would be a guess. ``n`` None: its N is
    checked later, with the weight's (an assigned scale)."""
    lined = sum(d != 1 for d in ws.shape) <= 1
    if lined and (n is None or ws.numel() in (n, 1)):
        return
    count = "one scale per output channel" if n is None else f"N={n} scales (per channel)"
    raise ScaleError(f"{_where(layer)}{what}: must hold {count} along one dim ([N], [N, 1] or [1, N]) or one "
                     f"element (per tensor), got shape {tuple(ws.shape)}")


def check_bias_values(bias: torch.Tensor, out_dtype: torch.dtype, *, what: str = "bias",
                      layer: str | None = None) -> None:
    """Once, when a layer's bias comes in or its output dtype changes: every value finite in ``out_dtype``, the dtype
    the layer holds it in and adds it in (a NaN or an infinity, or a float32 value beyond fp16's range, would give
    every token that output channel's NaN or infinity). Reads the values: a host-device sync, never per call; meta
    tensors have none to read. The functional ``quant_gemm`` adds the bias it is given, as given."""
    if bias.device.type == "meta" or bias.numel() == 0:
        return
    flat = bias.detach().reshape(-1)
    held = flat.to(out_dtype)
    bad = ~torch.isfinite(held)
    if bad.any():
        col = int(bad.nonzero()[0, 0])
        given = float(flat[col])
        got = f"{given!r}" + (f" ({float(held[col])!r} as {out_dtype})" if math.isfinite(given) else "")
        raise BiasError(f"{_where(layer)}{what}: a bias must be finite in the layer's output dtype {out_dtype}, got "
                        f"{got} for output channel {col} ({int(bad.sum())} such values)")


@dataclass(frozen=True)
class GemmProblem:
    """What a provider's predicate sees: sizes, dtypes, device and scale granularity."""

    m: int
    n: int
    k: int
    kind: str  # "int8" | "fp8"
    x_dtype: torch.dtype
    out_dtype: torch.dtype
    device: torch.device
    per_token: bool
    per_channel: bool
    has_bias: bool


def _likely_cause(kx: int, kw: int, n: int) -> str:
    """What likely sent an activation of width ``kx`` to a weight ``[n, kw]``: each cause the sizes fit."""
    causes = []
    if kx == n != kw:
        causes.append(f"the weight is transposed ([K={n}, N={kw}] given where [N, K] is expected: the activation's "
                      "width is the weight's first dim)")
    if kx == 2 * kw:
        causes.append("the [m, 2H] gate_up placeholder reached the GEMM instead of the quantized activation xq (a "
                      "linear method that ignores x_and_scale_quanted, or silu_and_mul skipped)")
    if 2 * kx == kw:
        causes.append("the activation was halved twice (silu_and_mul applied to an already activated tensor)")
    if not causes:
        return "likely cause: the activation was produced for another layer or another tensor-parallel shard"
    return "likely cause: " + "; or ".join(causes) + "; or an activation produced for another layer"


def check_plain_input_dtype(x: torch.Tensor, key: K.QuantKey, layer: str) -> None:
    """A plain (float) activation that a layer quantizes itself to ``key``: bf16, fp16 or fp32."""
    if x.dtype not in ACT_DTYPES:
        raise QuantDTypeError(f"{layer}: a plain input is quantized to {K.key_name(key)} here and must be bfloat16, "
                              f"float16 or float32, got {x.dtype} (a quantized one comes as a QuantizedActivation)")


def check_activation_k(x: torch.Tensor, w: torch.Tensor, layer: str | None) -> None:
    """An activation ``[..., K]`` (float before its quantization, or quantized) for a 2-D weight ``[N, K]``."""
    name = layer or "quant_gemm"
    n, kw = w.shape
    check_dense(x, f"{name}: activation")
    if x.dim() == 0:
        raise ShapeMismatchError(f"{name}: activation must have rank >= 1 ([..., K={kw}]); got a 0-d tensor",
                                 layer=layer, n=n, k=kw, x_shape=x.shape, w_shape=w.shape)
    kx = x.shape[-1]
    if kx != kw:
        m = math.prod(x.shape[:-1])
        raise ShapeMismatchError(
            f"{name}: expected K={kw} (weight [N={n}, K={kw}]) but received K={kx} "
            f"(activation {tuple(x.shape)}, M={m}); {_likely_cause(kx, kw, n)}",
            layer=layer, m=m, n=n, k=kw, x_shape=x.shape, w_shape=w.shape)


def check_gemm_operands(x: torch.Tensor, xs: torch.Tensor, key: K.QuantKey, w: torch.Tensor,
                        ws: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype,
                        layer: str | None) -> GemmProblem:
    """Every per-call check of the checked entry; returns the problem description."""
    name = layer or "quant_gemm"
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
        raise TypeError(f"{name}: activation and weight must be tensors, got "
                        f"{type(x).__name__} and {type(w).__name__}")
    if w.dim() != 2:
        raise ShapeMismatchError(f"{name}: weight must be 2-D [N, K], got shape {tuple(w.shape)}",
                                 layer=layer, w_shape=w.shape)
    check_activation_k(x, w, layer)
    n, kw = w.shape
    m = math.prod(x.shape[:-1])
    kind = K.gemm_kind(key)
    weight_ok = w.dtype in FP8_DTYPES if kind == "fp8" else w.dtype == torch.int8
    if not weight_ok:
        raise QuantDTypeError(f"{name}: key {K.label(key)} needs {kind} weights, layer holds {w.dtype}")
    if x.dtype != w.dtype:  # int8 x int8, or the weight's own FP8 flavour
        raise QuantDTypeError(f"{name}: expected activation dtype {w.dtype} for key {K.label(key)}, got {x.dtype}")
    for what, s in (("activation scale", xs), ("weight scale", ws)):
        if not isinstance(s, torch.Tensor):
            raise TypeError(f"{name}: {what} must be a float32 tensor, got {type(s).__name__}")
        if s.dtype != torch.float32:
            raise QuantDTypeError(f"{name}: {what} must be float32, got {s.dtype}")
    for what, t in (("activation scale", xs), ("weight", w), ("weight scale", ws), ("bias", bias)):
        if isinstance(t, torch.Tensor):  # before any reshape of them, which sparse tensors refuse deep in torch
            check_dense(t, f"{name}: {what}")
    per_token = K.is_per_token(key)
    if per_token:
        if xs.shape != (*x.shape[:-1], 1) and xs.shape != (m, 1):  # one row per token, in the tokens' own layout
            raise ShapeMismatchError(
                f"{name}: per-token activation scale must be [*tokens, 1] with {m} rows ({[*x.shape[:-1], 1]}"
                f"{f' or [{m}, 1]' if x.dim() > 2 else ''} for activation {tuple(x.shape)}), got shape "
                f"{tuple(xs.shape)}: "
                + ("the token count matches, not the layout" if xs.numel() == m else "token count mismatch between xq "
                   "and xs"),
                layer=layer, m=m, n=n, k=kw, x_shape=x.shape, w_shape=w.shape)
    elif xs.numel() != 1:
        raise ScaleError(f"{name}: per-tensor activation scale must have 1 element, got shape {tuple(xs.shape)}")
    check_weight_scale_shape(ws, n, what="weight scale", layer=name)
    if out_dtype not in ACT_DTYPES:
        check_out_dtype(out_dtype, name)
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or bias.shape != (n,):
            raise ShapeMismatchError(f"{name}: bias must be [N={n}], got "
                                     f"{tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__}",
                                     layer=layer, n=n)
        if bias.dtype != out_dtype:
            raise QuantDTypeError(f"{name}: bias dtype {bias.dtype} must equal the output dtype {out_dtype}")
    for what, t in (("activation scale", xs), ("weight", w), ("weight scale", ws), ("bias", bias)):
        if t is not None and t.device != x.device:
            raise DeviceMismatchError(f"{name}: {what} is on {t.device}, activation on {x.device}")
    if not x.is_contiguous():
        raise LayoutError(f"{name}: quantized activation must be contiguous, got strides {x.stride()}")
    if not w.is_contiguous():
        raise LayoutError(f"{name}: weight must be contiguous [N, K], got strides {w.stride()}")
    return GemmProblem(m, n, kw, kind, x.dtype, out_dtype, x.device, per_token, ws.numel() == n, bias is not None)


def check_predicate_answer(answer: object, who: Callable[[], str]) -> tuple[bool, str]:
    """A support predicate's answer: exactly ``(ok: bool, reason: str)``; ``who()`` names the predicate's
    owner in the error (called only then: under torch.compile the check is traced, its message is not)."""
    if not (type(answer) is tuple and len(answer) == 2 and isinstance(answer[0], bool)
            and isinstance(answer[1], str)):
        shown = repr(answer)
        raise TypeError(f"{who()}: a support predicate must return (ok: bool, reason: str), got "
                        f"{type(answer).__name__} {shown[:80]}")
    return answer


def check_backend_names(names: object, who: str, valid) -> tuple[str, ...]:
    """A tuple (or list) of known backend names; a bare string is refused (it would be read as its letters)."""
    if isinstance(names, str):
        raise TypeError(f"{who}: backends must be a tuple of backend names, got the string {names!r}; "
                        f"write ({names!r},)")
    if not isinstance(names, (tuple, list)) or not names:
        raise TypeError(f"{who}: backends must be a non-empty tuple of backend names or None (all), got "
                        f"{type(names).__name__}")
    unknown = [n for n in names if not isinstance(n, str) or n not in valid]
    if unknown:
        raise BackendUnavailableError(f"{who}: unknown backend {', '.join(map(repr, unknown))}; valid names: "
                                      f"{', '.join(valid)}")
    return tuple(names)
