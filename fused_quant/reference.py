"""THE SPEC (docs/NUMERICS.md) in pure torch: every producer is tested bitwise against it.

``act_quant_ref(act, x, key, scale, numerics=..., fp8_dtype=...)`` is the unfused
chain: activation (rounded to the input dtype T unless the profile says
otherwise), then the quantizer, all quantizer arithmetic in fp32. Inputs of any
rank: leading dims are flattened for the per-token reduction and restored.
Outputs with NaN are canonical: FP8 NaN is 0x7f (e4m3fn) / 0x80 (e4m3fnuz) and a
NaN scale is the quiet NaN 0x7fc00000, whatever NaN payload or sign came in.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fused_quant import keys as K
from fused_quant.numerics import NumericsProfile, get_profile
from fused_quant.validation import ScaleError, ShapeMismatchError, check_activation, check_activation_input

FP8_NAN_CODE = {torch.float8_e4m3fn: 0x7F, torch.float8_e4m3fnuz: 0x80}
# Lower bound of a dynamic FP8 per-token scale (docs/NUMERICS.md), as fp32.
_FP8_MIN_SCALE_DIV = 512.0


# ``1 / (M8 * 512)`` rounded once to fp32: the value every backend uses.
_FP8_MIN_SCALE = {dt: float(torch.tensor(1.0 / (K.fp8_max(dt) * _FP8_MIN_SCALE_DIV), dtype=torch.float32))
                  for dt in FP8_NAN_CODE}


def fp8_min_scale(fp8_dtype: torch.dtype) -> float:
    """Lower bound of a dynamic FP8 per-token scale for ``fp8_dtype``."""
    return _FP8_MIN_SCALE[fp8_dtype]


def act_ref(act: str, x: torch.Tensor) -> torch.Tensor:
    """The activation alone, in the input dtype (what the unfused layer returns)."""
    check_activation(act)
    check_activation_input(x, act)
    return _act_fp32(act, x, get_profile("default")).to(x.dtype)


def _act_fp32(act: str, x: torch.Tensor, profile: NumericsProfile) -> torch.Tensor:
    """Activation as it enters the quantizer: fp32 holding values of T unless the profile keeps fp32."""
    t = x.dtype
    if act == "identity":
        return x.float()
    if act == "relu2":
        # square in fp32, one rounding to T
        return torch.relu(x.float()).square().to(t).float()
    d = x.shape[-1] // 2
    g, u = x[..., :d].float(), x[..., d:].float()
    s = F.silu(g).to(t).float()  # T(g / (1 + exp(-g))), fp32 math, one rounding
    y = s * u
    return y.to(t).float() if profile.round_silu_product else y


def _div(a: torch.Tensor | float, b: torch.Tensor | float) -> torch.Tensor:
    """IEEE fp32 quotient. Both operands become tensors on one device first: torch computes
    ``tensor / python_scalar`` on CUDA and ``python_scalar / tensor`` everywhere as a multiply
    by a reciprocal, which is not the correctly rounded quotient the spec asks for."""
    dev = a.device if isinstance(a, torch.Tensor) else b.device
    if not isinstance(a, torch.Tensor):
        a = torch.tensor(a, dtype=torch.float32, device=dev)
    if not isinstance(b, torch.Tensor):
        b = torch.tensor(b, dtype=torch.float32, device=dev)
    return torch.div(a, b)


def _canonical_nan_f32(s: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(s), torch.full_like(s, float("nan")), s)


def _to_fp8(v: torch.Tensor, fp8_dtype: torch.dtype, m8: float) -> torch.Tensor:
    # clamp propagates NaN; the NaN code is set explicitly so its sign/payload never leaks
    q = v.clamp(-m8, m8).to(fp8_dtype).view(torch.uint8)
    q = torch.where(torch.isnan(v), torch.full_like(q, FP8_NAN_CODE[fp8_dtype]), q)
    return q.view(fp8_dtype)


def _to_int8(v: torch.Tensor) -> torch.Tensor:
    # rne (torch.round is half-to-even), saturate to [-128, 127], NaN -> 0
    r = torch.round(v).clamp(-128.0, 127.0)
    return torch.where(torch.isnan(r), torch.zeros_like(r), r).to(torch.int8)


def quant_ref(y: torch.Tensor, key: K.QuantKey, scale: torch.Tensor | None = None, *,
              fp8_dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``y`` (any float dtype, read as fp32) for ``key``; returns (q, scale)."""
    key = K.normalize_key(key)
    K.key_name(key)
    yf = y.float()
    if K.is_static(key):
        if scale is None:
            raise ScaleError(f"{K.label(key)} needs a static scale")
        sc = scale.reshape(()).to(device=y.device, dtype=torch.float32)
        if K.is_fp8(key):
            inv = _div(1.0, sc)  # fp32 IEEE reciprocal, then multiply (docs/NUMERICS.md)
            return _to_fp8(yf * inv, fp8_dtype, K.fp8_max(fp8_dtype)), scale
        return _to_int8(_div(yf, sc)), scale
    # dynamic per-token: one scale per row of the last dim
    a = yf.abs().amax(dim=-1, keepdim=True)  # NaN propagates
    if K.is_fp8(key):
        m8 = K.fp8_max(fp8_dtype)
        s = torch.maximum(_div(a, m8), torch.tensor(fp8_min_scale(fp8_dtype), device=a.device))
        q = _to_fp8(_div(yf, s), fp8_dtype, m8)
    else:
        s = _div(a, K.INT8_MAX)
        inv = torch.where(a == 0, torch.zeros_like(a), _div(K.INT8_MAX, a))
        q = _to_int8(yf * inv)
    return q, _canonical_nan_f32(s)


def act_quant_ref(act: str, x: torch.Tensor, key: K.QuantKey, scale: torch.Tensor | None = None, *,
                  numerics: str | NumericsProfile | None = "default",
                  fp8_dtype: torch.dtype = torch.float8_e4m3fn) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused producer's spec: ``quant(act(x), key)``; returns (q, scale)."""
    check_activation(act)
    check_activation_input(x, act)
    return act_quant_unchecked(act, x, key, scale, get_profile(numerics), fp8_dtype)


def act_quant_unchecked(act: str, x: torch.Tensor, key: K.QuantKey, scale: torch.Tensor | None,
                        profile: NumericsProfile, fp8_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``act_quant_ref`` for input the caller has validated (the torch backend's producer)."""
    return quant_ref(_act_fp32(act, x, profile), key, scale, fp8_dtype=fp8_dtype)


def quantize_weight_ref(w: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel weight quantization: returns (wq [N, K], ws [N, 1] float32).

    int8: ``ws = max|w_row| / 127``, ``wq = sat(rne(w / ws))``; FP8: ``ws = max|w_row| / M8``,
    ``wq = fp8(clamp(w / ws))``. An all-zero row gets ws = 0 and wq = 0.
    """
    if w.dim() != 2:
        raise ShapeMismatchError(f"weight must be 2-D [N, K], got shape {tuple(w.shape)}", w_shape=w.shape)
    wf = w.float()
    a = wf.abs().amax(dim=1, keepdim=True)
    qmax = K.INT8_MAX if dtype == torch.int8 else K.fp8_max(dtype)
    ws = _div(a, qmax)
    v = _div(wf, torch.where(ws == 0, torch.ones_like(ws), ws))
    wq = _to_int8(v) if dtype == torch.int8 else _to_fp8(v, dtype, qmax)
    return wq, ws


def gemm_outside_bound(out: torch.Tensor, xq, xs, wq, ws, bias=None, *, exact_acc: bool) -> str:
    """'' where a W8A8 GEMM's ``out`` is within a sound error bound of float64, else what is not (the test suite's
    ``assert_gemm_close``, the selftest's GEMM checks).

    exact_acc (int8): the int32 accumulator is exact, so the error is the fp32 scaling
    (<= 4 ulp32 of |p|, p = acc * xs * ws), the rounding of p to Tout and of the bias add: each a rounding to
    nearest, at most half of Tout's eps relative (``gemm.dequant_epilogue``'s order).
    Otherwise (FP8: fp32 accumulation in any order, on GPUs after tensor-core partial sums of
    reduced precision) the bound uses sum |x||w| * xs * ws, and a whole ulp for each of two roundings, twice (a
    kernel may apply the two scales in either order and round once more). Half of it with a bias, a quarter without
    one, failed on an H100: torch's FP8 GEMM through its fp32 product and our epilogue, fp16 out
    (benchmarks/RESULTS.md, forty-ninth round).
    """
    x = xq.cpu().to(torch.float64)
    x = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])  # K = 0 too (-1 cannot be inferred against a 0)
    w = wq.cpu().to(torch.float64)
    xs64 = xs.cpu().to(torch.float64).reshape(-1, 1)
    s = xs64 * ws.cpu().to(torch.float64).reshape(1, -1)
    dot = x @ w.T
    p = dot * s
    b = bias.cpu().to(torch.float64) if bias is not None else torch.zeros(())
    ref = p + b
    eps_t = torch.finfo(out.dtype).eps
    if exact_acc:
        rounded = p.abs() + (ref.abs() if bias is not None else 0)  # the bias add's rounding only where there is one
        tol = eps_t / 2 * rounded + 4 * 2.0**-24 * p.abs()
    else:
        # scaled-mm kernels may apply the two scales in either order and round once more
        mag = (x.abs() @ w.abs().T) * s.abs()  # a negative scale: a magnitude still (quant_gemm reads no values)
        k = x.shape[1]
        acc = (k + 4) * 2.0**-24
        if out.is_cuda:
            # FP8 tensor cores sum their products in an accumulator of about 14 significant bits
            # (DeepSeek-V3 technical report, arXiv 2412.19437, section 3.3.2) before the sums reach
            # fp32. One truncation of up to 2^-13 of the partial sum per k-block of 32 products, and
            # partial sums promoted to fp32 at least every 128 products (the report's interval; on the
            # H200 the worst error relative to sum |x||w| falls with K, 2^-13.4 at K = 512 to 2^-16.8
            # at 14336: benchmarks/results/fp8_gemm_accumulation_H200.txt), so per promoted block at
            # most 4 truncations of its own magnitude: 4 * 2^-13 of sum |x||w| in all, whatever K
            acc += 4 * 2.0**-13
        tol = 2 * eps_t * (p.abs() + ref.abs()) + acc * mag
    tol = tol + torch.finfo(out.dtype).tiny
    o = out.detach().cpu().to(torch.float64).reshape(ref.shape)
    # non-finite values must sit where the reference has them (a NaN compares False to any bound)
    nan_o, nan_r = torch.isnan(o), torch.isnan(ref)
    if not torch.equal(nan_o, nan_r):
        return (f"NaN positions differ from the reference: extra at {(nan_o & ~nan_r).nonzero()[:5].tolist()}, "
                f"missing at {(nan_r & ~nan_o).nonzero()[:5].tolist()}")
    inf_r = torch.isinf(ref)
    if not torch.equal(o[inf_r], ref[inf_r]):
        return "infinities of the reference not reproduced"
    # out of range (adversarial rows of huge values, whose per-token scales are huge too): a result beyond
    # the output dtype's range by more than the bound must round to +-Inf; one within the bound of that
    # limit, or whose fp32 product acc * xs (the spec's epilogue's first product, in its order) may pass
    # fp32's, may round to +-Inf or stay within the bound
    out_max, f32_max, inf = torch.finfo(out.dtype).max, torch.finfo(torch.float32).max, float("inf")
    first = (dot * xs64).abs()
    finite = torch.isfinite(ref)
    must = finite & (ref.abs() - tol > out_max)
    fp32_over = first * (1 + 2.0**-20) > f32_max
    may = finite & ((ref.abs() + tol > out_max) | fp32_over)
    if not torch.equal(o[must], ref[must].sign() * inf):
        return f"results beyond {out.dtype}'s range not +-Inf"
    err = (o - ref).abs()
    # where acc * xs passes fp32's range the epilogue's product is +-Inf with the product's sign, which a finite
    # bias added after it keeps, whatever the float64 sum with the bias says
    inf_ok = torch.where(fp32_over, o == p.sign() * inf, o == ref.sign() * inf)
    bad = finite & ~must & ~(err <= tol) & ~(may & inf_ok)
    if bad.any():
        return (f"{int(bad.sum())}/{o.numel()} elements outside the float64 bound; worst excess "
                f"{float((err - tol)[bad].max()):.3e}")
    return ""
