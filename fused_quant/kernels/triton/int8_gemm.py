"""Triton device code: int8 x int8 -> int32 GEMMs with the dequant epilogue fused.

``out[m, n] = Tout(float(acc[m, n]) * xs[m] * ws[n]) + bias[n]`` (docs/NUMERICS.md,
the same order as ``gemm.dequant_epilogue``); x is [M, K] row-major, w is
[N, K] row-major (so the tile loaded from w is used transposed). Two kernels, the same
epilogue and the same bits (int8 products add up exactly in int32): ``scaled_int8_gemm_kernel``
loads its tiles through pointers (any K, any arch); ``scaled_int8_gemm_tma_kernel`` through
tensor descriptors (TMA on SM90+), one tile after another over ``programs`` programs (a
persistent grid where ``programs`` is below the number of tiles).
"""

import triton
import triton.language as tl

from fused_quant.kernels.triton.pdl import pdl_prologue


@triton.jit
def _grouped_tile(tile, num_m, num_n, GROUP_M: tl.constexpr):
    # grouped ordering keeps a band of x tiles hot in L2 while sweeping w
    group = GROUP_M * num_n
    first_m = (tile // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (tile % group) % size_m, (tile % group) // size_m


@triton.jit
def _dequant_store(acc, rm, rn, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, stride_om,
                   XS_PER_TOKEN: tl.constexpr, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                   OUT: tl.constexpr):
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


@triton.jit
def scaled_int8_gemm_kernel(x_ptr, w_ptr, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, K,
                            stride_xm, stride_wn, stride_om,
                            XS_PER_TOKEN: tl.constexpr, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                            OUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PDL: tl.constexpr):
    pdl_prologue(PDL)
    pid_m, pid_n = _grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
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
    _dequant_store(acc, rm, rn, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, stride_om,
                   XS_PER_TOKEN, WS_PER_CHANNEL, HAS_BIAS, OUT)


@triton.jit
def scaled_int8_gemm_tma_kernel(x_desc, w_desc, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, K, stride_om, programs,
                                XS_PER_TOKEN: tl.constexpr, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                                OUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, FLATTEN: tl.constexpr,
                                PDL: tl.constexpr):
    # x_desc: [M, K] in [BLOCK_M, BLOCK_K] blocks, w_desc: [N, K] in [BLOCK_N, BLOCK_K] blocks; a block past
    # the tensor's edge reads zeros, so the K tail and the last rows need no masks
    pdl_prologue(PDL)
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_m * num_n, programs, flatten=FLATTEN):
        pid_m, pid_n = _grouped_tile(tile, num_m, num_n, GROUP_M)
        off_m, off_n = pid_m * BLOCK_M, pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for k in range(steps):
            a = x_desc.load([off_m, k * BLOCK_K])
            b = w_desc.load([off_n, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc, out_dtype=tl.int32)
        rm = off_m.to(tl.int64) + tl.arange(0, BLOCK_M)
        rn = off_n.to(tl.int64) + tl.arange(0, BLOCK_N)
        _dequant_store(acc, rm, rn, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, stride_om,
                       XS_PER_TOKEN, WS_PER_CHANNEL, HAS_BIAS, OUT)
