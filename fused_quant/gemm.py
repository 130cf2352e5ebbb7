"""GEMM providers and the one checked entry every consumer GEMM goes through.

``quant_gemm`` validates rank, K agreement, token count, dtypes, scale shapes,
device and contiguity (metadata only: no sync, CUDA-graph safe), then calls the
first provider of the backend that is not disabled by FUSED_QUANT_DISABLED_GEMMS
and whose predicate accepts the problem, then checks what the provider returned.
No provider, built-in or user-registered, can be reached with unchecked operands.

Provider call: ``fn(xq [M, K], xs [M, 1] | [1, 1], w [N, K], ws [N, 1] | [1, 1],
bias [N] | None, out_dtype) -> out [M, N]`` with
``out = Tout(float(xq @ w.T) * xs * ws) + bias`` (NUMERICS.md, consumer GEMMs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from fused_quant import envs
from fused_quant.tracing import graph_constant
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.validation import (
    ACT_DTYPES,
    BackendUnavailableError,
    DeviceMismatchError,
    GemmProviderError,
    LayoutError,
    QuantDTypeError,
    ScaleError,
    ShapeMismatchError,
    UnsupportedError,
)

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)


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


GemmFn = Callable[..., torch.Tensor]
GemmSupportFn = Callable[[GemmProblem], "tuple[bool, str]"]


@dataclass(frozen=True)
class GemmProvider:
    name: str
    kind: str
    fn: GemmFn
    supported: GemmSupportFn | None = None

    def check(self, problem: GemmProblem) -> tuple[bool, str]:
        if problem.kind != self.kind:
            return False, f"{self.name} is a {self.kind} GEMM"
        return (True, "") if self.supported is None else self.supported(problem)


# backend name -> providers in selection order; key None: providers for every backend, tried first
_PROVIDERS: dict[str | None, list[GemmProvider]] = {}


def register_gemm_provider(name: str, fn: GemmFn | None = None, *, kind: str,
                           backends: tuple[str, ...] | None = None, supported: GemmSupportFn | None = None,
                           first: bool = True):
    """Register a GEMM provider (as a call or a decorator) for some backends, or all (None).

    ``first`` puts it ahead of the providers already there. Re-registering a name
    replaces the old entry (idempotent for plugins).
    """
    if kind not in ("int8", "fp8"):
        raise UnsupportedError(f"GEMM provider kind must be 'int8' or 'fp8', got {kind!r}")

    def add(f: GemmFn) -> GemmFn:
        provider = GemmProvider(name, kind, f, supported)
        for backend in backends or (None,):
            chain = _PROVIDERS.setdefault(backend, [])
            chain[:] = [p for p in chain if p.name != name]
            chain.insert(0, provider) if first else chain.append(provider)
        clear_gemm_selection_cache()
        return f

    return add(fn) if fn is not None else add


def unregister_gemm_provider(name: str) -> None:
    for chain in _PROVIDERS.values():
        chain[:] = [p for p in chain if p.name != name]
    clear_gemm_selection_cache()


@graph_constant
def _disabled_gemms() -> frozenset[str]:
    return envs.disabled_gemms()


def gemm_providers(backend: str, kind: str | None = None) -> list[GemmProvider]:
    """Providers serving ``backend`` in selection order, without the disabled ones."""
    from fused_quant.backends import load_backends

    load_backends()
    disabled = _disabled_gemms()
    chain = _PROVIDERS.get(None, []) + _PROVIDERS.get(backend, [])
    return [p for p in chain if p.name not in disabled and (kind is None or p.kind == kind)]


# (problem, backend, disabled names, current backend) -> choice. Predicates are pure functions
# of the problem and of process-wide facts, so a choice is reused until providers change.
_SELECTED: dict[tuple, tuple[GemmProvider, str]] = {}
_SELECTED_MAX = 4096


def clear_gemm_selection_cache() -> None:
    """Forget cached provider choices (after registering providers or changing what they depend on)."""
    _SELECTED.clear()


def select_gemm_provider(problem: GemmProblem, backend: str | None = None) -> tuple[GemmProvider, str]:
    """The first provider that accepts ``problem``; with ``backend=None`` the current
    backend's providers, then the torch backend's. Raises BackendUnavailableError with every reason."""
    from fused_quant.backends import TORCH
    from fused_quant.registry import current_backend_name

    current = current_backend_name()
    cache_key = (problem, backend, _disabled_gemms(), current)
    hit = _SELECTED.get(cache_key)
    if hit is not None:
        return hit
    chain = [backend] if backend else list(dict.fromkeys([current, TORCH]))
    reasons = []
    for name in chain:
        for provider in gemm_providers(name, problem.kind):
            ok, why = provider.check(problem)
            if ok:
                if len(_SELECTED) >= _SELECTED_MAX:
                    _SELECTED.clear()
                _SELECTED[cache_key] = (provider, name)
                return provider, name
            reasons.append(f"{provider.name}: {why}")
    disabled = sorted(envs.disabled_gemms())
    raise BackendUnavailableError(
        f"no {problem.kind} GEMM provider accepts M={problem.m} N={problem.n} K={problem.k} on "
        f"{problem.device} ({'; '.join(reasons) or 'none registered'})"
        + (f"; disabled by FUSED_QUANT_DISABLED_GEMMS: {', '.join(disabled)}" if disabled else "")
    )


def _likely_cause(kx: int, kw: int) -> str:
    if kx == 2 * kw:
        return ("likely cause: the [m, 2H] gate_up placeholder reached the GEMM instead of the quantized "
                "activation xq (a linear method that ignores x_and_scale_quanted, or silu_and_mul skipped)")
    if 2 * kx == kw:
        return "likely cause: the activation was halved twice (silu_and_mul applied to an already activated tensor)"
    return "likely cause: the activation was produced for another layer or another tensor-parallel shard"


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
    n, kw = w.shape
    if x.dim() == 0:
        raise ShapeMismatchError(f"{name}: activation must have rank >= 1 ([..., K]); got a 0-d tensor",
                                 layer=layer, n=n, k=kw, x_shape=x.shape, w_shape=w.shape)
    kx = x.shape[-1]
    m = math.prod(x.shape[:-1])
    if kx != kw:
        raise ShapeMismatchError(
            f"{name}: expected K={kw} (weight [N={n}, K={kw}]) but received K={kx} "
            f"(activation {tuple(x.shape)}, M={m}); {_likely_cause(kx, kw)}",
            layer=layer, m=m, n=n, k=kw, x_shape=x.shape, w_shape=w.shape)
    kind = "fp8" if K.is_fp8(key) else "int8"
    weight_ok = w.dtype in FP8_DTYPES if kind == "fp8" else w.dtype == torch.int8
    if not weight_ok:
        raise QuantDTypeError(f"{name}: key {key} needs {kind} weights, layer holds {w.dtype}")
    if x.dtype != w.dtype:  # int8 x int8, or the weight's own FP8 flavour
        raise QuantDTypeError(f"{name}: expected activation dtype {w.dtype} for key {key}, got {x.dtype}")
    for what, s in (("activation scale", xs), ("weight scale", ws)):
        if not isinstance(s, torch.Tensor):
            raise TypeError(f"{name}: {what} must be a float32 tensor, got {type(s).__name__}")
        if s.dtype != torch.float32:
            raise QuantDTypeError(f"{name}: {what} must be float32, got {s.dtype}")
    per_token = K.is_per_token(key)
    if per_token:
        if xs.numel() != m or xs.dim() == 0 or xs.shape[-1] != 1:
            raise ShapeMismatchError(
                f"{name}: per-token activation scale must be [*tokens, 1] with {m} rows (activation "
                f"{tuple(x.shape)}), got shape {tuple(xs.shape)}: token count mismatch between xq and xs",
                layer=layer, m=m, n=n, k=kw, x_shape=x.shape, w_shape=w.shape)
    elif xs.numel() != 1:
        raise ScaleError(f"{name}: per-tensor activation scale must have 1 element, got shape {tuple(xs.shape)}")
    if ws.numel() not in (n, 1):
        raise ScaleError(f"{name}: weight scale must have N={n} (per channel) or 1 element, got {tuple(ws.shape)}")
    if out_dtype not in ACT_DTYPES:
        raise QuantDTypeError(f"{name}: output dtype must be bfloat16, float16 or float32, got {out_dtype}")
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


def quant_gemm(qa: QuantizedActivation, weight: torch.Tensor, weight_scale: torch.Tensor,
               bias: torch.Tensor | None = None, *, out_dtype: torch.dtype, layer: str | None = None,
               backend: str | None = None) -> torch.Tensor:
    """The checked entry: validate, pick a provider, call it, check its output; ``[*lead, N]``.

    Under torch.compile this is one opaque custom op (``fused_quant::quant_gemm``), so provider
    choice happens at run time and no provider's shape rules become recompile guards.
    """
    if not isinstance(qa, QuantizedActivation):
        raise TypeError(f"{layer or 'quant_gemm'}: expected a QuantizedActivation, got {type(qa).__name__}")
    key = K.key_name(qa.quant_key)
    if backend is not None:
        from fused_quant.backends import get_backend

        get_backend(backend)  # an unknown name raises, listing the valid ones
    if torch.compiler.is_compiling():
        return torch.ops.fused_quant.quant_gemm(qa.data, qa.scale, weight, weight_scale, bias, out_dtype, key,
                                                layer or "", backend or "")
    return checked_gemm(qa.data, qa.scale, weight, weight_scale, bias, out_dtype, key, layer or "", backend or "")


def checked_gemm(x: torch.Tensor, xs: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor,
                 bias: torch.Tensor | None, out_dtype: torch.dtype, key: str, layer: str, backend: str) -> torch.Tensor:
    """Body of the checked entry (also the custom op's implementation)."""
    p = check_gemm_operands(x, xs, K.key_from_name(key), weight, weight_scale, bias, out_dtype, layer or None)
    out_shape = (*x.shape[:-1], p.n)
    if p.m == 0:
        return torch.empty(out_shape, dtype=out_dtype, device=x.device)
    provider, _ = select_gemm_provider(p, backend or None)
    xs2 = xs.reshape(p.m, 1) if p.per_token else xs.reshape(1, 1)
    out = provider.fn(x.reshape(p.m, p.k), xs2, weight, weight_scale.reshape(-1, 1), bias, out_dtype)
    if (not isinstance(out, torch.Tensor) or out.shape != (p.m, p.n) or out.dtype != out_dtype
            or out.device != x.device):
        got = f"{tuple(out.shape)} {out.dtype} on {out.device}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise GemmProviderError(f"{layer or 'quant_gemm'}: GEMM provider {provider.name} returned {got}, "
                                f"expected ({p.m}, {p.n}) {out_dtype} on {x.device}")
    return out.reshape(out_shape)


def dequant_epilogue(acc: torch.Tensor, xs: torch.Tensor, ws: torch.Tensor, bias: torch.Tensor | None,
                     out_dtype: torch.dtype) -> torch.Tensor:
    """``Tout(float(acc) * xs * ws) + bias``: the one epilogue order every int8 provider follows."""
    out = (acc.to(torch.float32) * xs * ws.reshape(1, -1)).to(out_dtype)
    return out if bias is None else out + bias
