"""Triton device code: int8 x int8 -> int32 GEMM with the dequant epilogue fused.

``out[m, n] = Tout(float(acc[m, n]) * xs[m] * ws[n]) + bias[n]`` (docs/NUMERICS.md,
the same order as ``gemm.dequant_epilogue``); x is [M, K] row-major, w is
[N, K] row-major (so the tile loaded from w is used transposed).
"""

import triton
import triton.language as tl

from fused_quant.kernels.triton.pdl import pdl_prologue


@triton.jit
def scaled_int8_gemm_kernel(x_ptr, w_ptr, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, K,
                            stride_xm, stride_wn, stride_om,
                            XS_PER_TOKEN: tl.constexpr, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                            OUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PDL: tl.constexpr):
    pdl_prologue(PDL)
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # grouped ordering keeps a band of x tiles hot in L2 while sweeping w
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + rk[None, :]
    w_ptrs = w_ptr + rn[None, :] * stride_wn + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0)
        b = tl.load(w_ptrs, mask=(rn[None, :] < N) & (rk[:, None] < k_left), other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if XS_PER_TOKEN:
        xs = tl.load(xs_ptr + rm, mask=rm < M, other=0.0)[:, None]
    else:
        xs = tl.load(xs_ptr)
    if WS_PER_CHANNEL:
        ws = tl.load(ws_ptr + rn, mask=rn < N, other=0.0)[None, :]
    else:
        ws = tl.load(ws_ptr)
    out = (acc.to(tl.float32) * xs * ws).to(OUT)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
        out = (out.to(tl.float32) + bias.to(tl.float32)).to(OUT)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], out, mask=mask)
