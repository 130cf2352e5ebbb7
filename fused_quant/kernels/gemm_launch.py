"""Host side of the CUDA/ROCm GEMM providers: ``torch._scaled_mm`` (FP8), ``torch._int_mm`` +
epilogue and the Triton scaled int8 GEMM, each with its ``(ok, reason)`` predicate.

Tile configs are data (``INT8_GEMM_CONFIGS``: first row whose max_m >= M).
"""

from __future__ import annotations

import functools

import torch

from fused_quant.gemm import GemmProblem, dequant_epilogue

# (max_m, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
INT8_GEMM_CONFIGS = (
    (64, 64, 64, 128, 8, 4, 4),
    (256, 64, 128, 128, 8, 4, 4),
    (1 << 62, 128, 256, 128, 8, 8, 3),
)


def _on_gpu(p: GemmProblem) -> tuple[bool, str]:
    if p.device.type != "cuda":
        return False, f"needs a GPU tensor, got {p.device}"
    return True, ""


def scaled_mm_supported(p: GemmProblem) -> tuple[bool, str]:
    ok, why = _on_gpu(p)
    if not ok:
        return ok, why
    if p.k % 16 or p.n % 16:
        return False, f"torch._scaled_mm needs K and N divisible by 16 (K={p.k}, N={p.n})"
    return True, ""


def scaled_mm_fp8(xq, xs, w, ws, bias, out_dtype):
    m, n = xq.shape[0], w.shape[0]
    if ws.numel() == 1 and xs.numel() == 1:
        out = torch._scaled_mm(xq, w.t(), scale_a=xs.reshape(()), scale_b=ws.reshape(()), out_dtype=out_dtype)
    elif out_dtype == torch.bfloat16:
        # row-wise scaling (the fast cuBLAS/CUTLASS path) needs both scales row-wise and bf16 out;
        # [M, 1] and [N, 1] scales are already that layout as views, only per-tensor ones expand
        scale_a = xs if xs.numel() == m else xs.expand(m, 1).contiguous()
        scale_b = ws.reshape(1, -1) if ws.numel() == n else ws.reshape(1, 1).expand(1, n).contiguous()
        out = torch._scaled_mm(xq, w.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
    else:
        one = torch.ones((), dtype=torch.float32, device=xq.device)
        acc = torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        return dequant_epilogue(acc, xs, ws, bias, out_dtype)
    return out if bias is None else out + bias


def int_mm_supported(p: GemmProblem) -> tuple[bool, str]:
    ok, why = _on_gpu(p)
    if not ok:
        return ok, why
    if p.m <= 16 or p.k % 8 or p.n % 8:
        return False, f"torch._int_mm needs M > 16 and K, N divisible by 8 (M={p.m}, K={p.k}, N={p.n})"
    return True, ""


def int_mm_int8(xq, xs, w, ws, bias, out_dtype):
    return dequant_epilogue(torch._int_mm(xq, w.t()), xs, ws, bias, out_dtype)


def triton_int8_supported(p: GemmProblem) -> tuple[bool, str]:
    return _on_gpu(p)


@functools.cache
def _tl_out():
    import triton.language as tl

    return {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32}


def triton_int8(xq, xs, w, ws, bias, out_dtype):
    from fused_quant.kernels.triton.int8_gemm import scaled_int8_gemm_kernel

    m, k = xq.shape
    n = w.shape[0]
    out = torch.empty((m, n), dtype=out_dtype, device=xq.device)
    for max_m, bm, bn, bk, gm, warps, stages in INT8_GEMM_CONFIGS:
        if m <= max_m:
            break
    grid = (-(-m // bm) * -(-n // bn),)
    scaled_int8_gemm_kernel[grid](
        xq, w, xs, ws, bias if bias is not None else xs, out, m, n, k,
        xq.stride(0), w.stride(0), out.stride(0),
        XS_PER_TOKEN=xs.numel() != 1 or m == 1, WS_PER_CHANNEL=ws.numel() != 1 or n == 1,
        HAS_BIAS=bias is not None, OUT=_tl_out()[out_dtype],
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return out
