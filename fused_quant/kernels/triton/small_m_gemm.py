"""Triton device code: the small-M W8A8 GEMM (FP8 or int8), weight-streaming, swap-AB, optional split-K.

At small M a W8A8 GEMM is a stream of the weight: each output tile reads a block of ``BLOCK_N``
weight rows once. The MMA's wide (M) side takes those weight rows and the narrow side the tokens
(``tl.dot(w_tile [BLOCK_N, BLOCK_K], x_tile.T [BLOCK_K, BLOCK_M])``), so a 16-token batch fills no
more than one 16-wide MMA column block. Program (n, m, s) computes rows ``n*BLOCK_N..`` of the
transposed output for tokens ``m*BLOCK_M..`` over its share of K (the grid holds N blocks on axis 0, or with
``TOKENS_FIRST`` the token blocks, and the K splits on axis 2): with ``SPLIT`` the share is one of
``num_programs(2)`` slices, written as a partial sum to ``part[s, m, n]`` and summed, in slice
order (a fixed order: the same bits on every run, captured or not), by ``split_k_epilogue_kernel``
(under CUDA graph capture: the least GPU time) or, with ``LAST_REDUCES`` (eager calls: one launch
fewer for the host), by the tile's last split to finish: each split counts itself in on the tile's
counter (one per output tile, indexed by the program's axes 1 and 0; an atomic with release and acquire
order after its partial is stored), and
the one that counts last sets the counter back to 0, sums the partials and applies the epilogue. A
bound call's counters are its own, one set per stream, and start at 0.

A one-token block (``BLOCK_M`` = 1, the table's pick at one token for some shapes) takes no MMA, whose narrowest
token side is 16 lanes: ``_lane_products`` multiplies on the CUDA cores, each K lane keeps its own sum over the
loop, and the lanes are summed once after it.

With ``XQ`` (the QUANT code of a key, ``act_quant``) the activation comes as floats and the kernel
quantizes each tile as the identity producer would, bit for bit (``act_quant.quantized`` for per-token
keys, ``act_quant.static_quantized`` for per-tensor ones): one launch
instead of the producer's launch, its output and the GEMM's, and the GEMM's result is the same bits
either way. A per-tensor key brings its static scale; for a per-token key each program first sweeps
its tokens' whole rows for their absmax (``_rows_absmax``) and derives the scales as the producer does
(``act_quant.token_scale``); with split-K the programs of the first N block and split store them at
``xs_ptr`` for the epilogue kernel. It costs the GPU a float tile's load and its quantization per K
step (and the sweep), which pays at a 16-token block in eager calls, where the host's launches are
the bottleneck, and for per-tensor keys at a few tokens under capture too, where the producer's launch
leaves the critical path (``gemm_launch.bind_small_m_quantizing``, ``QUANTIZING_CAPTURED_MAX_M``).

With ``ACT_Q`` (the QUANT code of a per-tensor key) the output is not stored: the kernel applies the
silu_and_mul producer of the next layer's key to it (``_act_epilogue``), each program's weight rows half
gate and half the matching up rows (N/2 further), and stores the quantized activation ``q [M, N/2]`` at
``out_ptr`` with the per-tensor scale at ``ys_ptr``: the bits of the producer on the plain output, without
the output's store, the producer's launch and its loads (``gemm_launch.bind_small_m_producing``).

Epilogue (docs/NUMERICS.md, consumer GEMMs; the order of ``gemm.dequant_epilogue``):
``out[m, n] = Tout(float(acc[m, n]) * xs[m] * ws[n]) + bias[n]``, the bias added in Tout.
"""

import triton
import triton.language as tl

from fused_quant.kernels.triton.act_quant import (FP8_TOKEN, INT8_TOKEN, canonical_nan, quantized,
                                                  row_absmax, silu, static_quantized, static_scale, token_scale)
from fused_quant.kernels.triton.pdl import pdl_prologue, prefetch_l2

NO_XQ: tl.constexpr = tl.constexpr(-1)  # XQ: the activation comes quantized; ACT_Q: the output is stored as is
SWEEP_STAGES: tl.constexpr = tl.constexpr(3)  # the per-token absmax sweep's loads in flight


@triton.jit
def _load_xs(xs_ptr, rm, M, XS_PER_TOKEN: tl.constexpr):
    """The activation scale as the epilogue multiplies it in: ``[1, BLOCK_M]`` per token, else a scalar."""
    if XS_PER_TOKEN:
        return tl.load(xs_ptr + rm, mask=rm < M, other=0.0)[None, :]
    else:
        return tl.load(xs_ptr)


@triton.jit
def _dequantized(acc, rn, xs, ws_ptr, bias_ptr, N, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                 OUT: tl.constexpr):
    """``acc`` ([BLOCK_N, BLOCK_M]: output columns rn x tokens) scaled, cast to OUT and the bias added."""
    if WS_PER_CHANNEL:
        ws = tl.load(ws_ptr + rn, mask=rn < N, other=0.0)[:, None]
    else:
        ws = tl.load(ws_ptr)
    out = (acc.to(tl.float32) * xs * ws).to(OUT)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[:, None]
        out = (out.to(tl.float32) + bias.to(tl.float32)).to(OUT)
    return out


@triton.jit
def _epilogue(acc, rn, rm, xs, ws_ptr, bias_ptr, out_ptr, M, N, stride_om,
              WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr, OUT: tl.constexpr):
    """Scale, cast and store ``acc`` ([BLOCK_N, BLOCK_M]: output columns rn x tokens rm)."""
    out = _dequantized(acc, rn, xs, ws_ptr, bias_ptr, N, WS_PER_CHANNEL, HAS_BIAS, OUT)
    tl.store(out_ptr + rm[None, :] * stride_om + rn[:, None], out, mask=(rn[:, None] < N) & (rm[None, :] < M))


@triton.jit
def _act_epilogue(acc, rn, pid_n, rm, xs, ws_ptr, bias_ptr, q_ptr, ys_ptr, M, N, stride_qm,
                  WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr, OUT: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, ACT_Q: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                  FAST_SILU: tl.constexpr, Y_M8: tl.constexpr, Y_FP8: tl.constexpr, Y_NAN_CODE: tl.constexpr,
                  Y_SATFINITE: tl.constexpr, Y_FAST_DIV: tl.constexpr):
    """The output's silu_and_mul and its per-tensor quantization, stored: rows ``0..BLOCK_N/2`` of ``acc`` are
    the gate columns ``rc`` of the output (block ``pid_n`` of ``BLOCK_N / 2`` columns), the rest the up columns
    ``rc + N/2``. Each is first the OUT value the plain epilogue stores, then the silu_and_mul producer's steps
    on it, bit for bit (``act_quant``: T(silu(g)), the product, rounded to T unless the profile keeps fp32,
    ``static_quantized``), stored at ``q[rm, rc]``."""
    out = _dequantized(acc, rn, xs, ws_ptr, bias_ptr, N, WS_PER_CHANNEL, HAS_BIAS, OUT).to(tl.float32)
    g, u = tl.split(tl.permute(tl.reshape(out, (2, BLOCK_N // 2, BLOCK_M)), (1, 2, 0)))
    y = silu(g, OUT, FAST_SILU).to(OUT).to(tl.float32) * u
    if ROUND_PRODUCT:
        y = y.to(OUT).to(tl.float32)
    ys, yr = static_scale(ys_ptr)
    q = static_quantized(y, ys, yr, ACT_Q, Y_M8, Y_FP8, Y_NAN_CODE, Y_SATFINITE, Y_FAST_DIV)
    rc = pid_n.to(tl.int64) * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
    tl.store(q_ptr + rm[None, :] * stride_qm + rc[:, None], q, mask=(rc[:, None] < N // 2) & (rm[None, :] < M))


@triton.jit
def _sum_partials(part_ptr, rn, rm, M, N, SPLITS, INT8: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_M: tl.constexpr):
    """``sum(part[s, rm, rn] for s in 0..SPLITS-1)``, in that order from zero ([BLOCK_N, BLOCK_M]); read
    from L2 (``.cg``), where the other programs' stores are."""
    mask = (rn[:, None] < N) & (rm[None, :] < M)
    ptrs = part_ptr + rm[None, :] * N + rn[:, None]
    if INT8:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for _ in range(0, SPLITS):
        acc += tl.load(ptrs, mask=mask, other=0, cache_modifier=".cg")
        ptrs += M * N
    return acc


@triton.jit
def _split_k_blocks(K, BLOCK_K: tl.constexpr, split, splits):
    """The K blocks ``[first, last)`` of split ``split`` of ``splits`` (none where last <= first)."""
    k_blocks = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_blocks, splits)
    k_first = split * per_split
    return k_first, tl.minimum(k_first + per_split, k_blocks)


@triton.jit
def _token_rows(rm, M):
    """The row of x each token lane addresses: its own, and a lane past M row ``rm % M`` (its result is never
    stored; the float-x paths mask such lanes and read nothing for them). With every lane past M reading row
    0 the GEMMs took up to 2.15x as long at M between the token blocks' multiples (int8 down at M = 192 on
    the H200; benchmarks/RESULTS.md, nineteenth round)."""
    return rm % M


@triton.jit
def _rows_absmax(x_ptr, rows, m_in, stride_xm, K, BLOCK_M: tl.constexpr, SWEEP_K: tl.constexpr):
    """max |x| over each of ``rows``' K floats (fp32, NaN propagating; rows not ``m_in`` are not read and
    give 0), as the identity producer reduces a row: the largest bit pattern of |x| (``row_absmax``), over
    ``[BLOCK_M, SWEEP_K]`` tiles, each reduced as it comes. The sweep stands between a program's start and its
    weight stream, so its tiles are as wide as the launch sizes them (``gemm_launch.sweep_width``): few steps."""
    rk = tl.arange(0, SWEEP_K)[None, :]
    ptrs = x_ptr + rows[:, None] * stride_xm + rk
    amax = tl.zeros((BLOCK_M,), dtype=tl.int32)
    for k0 in tl.range(0, K, SWEEP_K, num_stages=SWEEP_STAGES):  # pipelined: loads in flight, not one at a time
        x = tl.load(ptrs, mask=m_in & (rk < K - k0), other=0.0)  # masked lanes hold 0
        amax = tl.maximum(amax, row_absmax(x.to(tl.float32)).to(tl.int32, bitcast=True))
        ptrs += SWEEP_K
    return amax.to(tl.float32, bitcast=True)


@triton.jit
def _lane_products(w, x, INT8: tl.constexpr):
    """``w [BLOCK_N, BLOCK_K] * x [1, BLOCK_K]`` elementwise in the accumulator's type (int32 for int8, exact; fp32
    for FP8, where a product of two e4m3 values is exact too): the one-token GEMM on the CUDA cores, without the
    16-wide MMA tile that would be 15/16 padding and without a split-K reduction to fill the SMs (BLOCK_N rows
    as narrow as the sweep finds fastest)."""
    if INT8:
        return w.to(tl.int32) * x.to(tl.int32)
    else:
        return w.to(tl.float32) * x.to(tl.float32)


@triton.jit
def _prefetch_addresses(w_ptr, rows, stride_wn, k_start, k_end, LINES: tl.constexpr):
    """``[rows, LINES]`` addresses in the weight: the first ``LINES`` 128-element (128-byte) lines of each
    row from ``k_start``; a line at or past ``k_end`` takes its row's first element instead."""
    offs = k_start + tl.arange(0, LINES)[None, :] * 128
    row = w_ptr + rows[:, None] * stride_wn
    return tl.where(offs < k_end, row + offs, row)


@triton.jit
def small_m_gemm_kernel(x_ptr, w_ptr, xs_ptr, ws_ptr, bias_ptr, out_ptr, part_ptr, lock_ptr, ys_ptr, M, N, K,
                        stride_xm, stride_wn, stride_om,
                        XS_PER_TOKEN: tl.constexpr, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                        OUT: tl.constexpr, INT8: tl.constexpr, SPLIT: tl.constexpr, LAST_REDUCES: tl.constexpr,
                        EVEN_K: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                        IMPRECISE: tl.constexpr, XQ: tl.constexpr, SWEEP_K: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                        NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_DIV: tl.constexpr,
                        MIN_SCALE: tl.constexpr, ACT_Q: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                        FAST_SILU: tl.constexpr, Y_M8: tl.constexpr, Y_FP8: tl.constexpr, Y_NAN_CODE: tl.constexpr,
                        Y_SATFINITE: tl.constexpr, Y_FAST_DIV: tl.constexpr, TOKENS_FIRST: tl.constexpr,
                        PREFETCH: tl.constexpr, EVICT_W: tl.constexpr, PDL: tl.constexpr):
    if TOKENS_FIRST:  # token blocks on axis 0: the programs of one weight tile launch side by side (``tokens_first``)
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    else:
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    if ACT_Q == NO_XQ:
        rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    else:  # the output's silu_and_mul (``_act_epilogue``): weight rows of BLOCK_N / 2 gate columns, then their up rows
        r = tl.arange(0, BLOCK_N)
        rc = pid_n.to(tl.int64) * (BLOCK_N // 2) + r % (BLOCK_N // 2)
        rn = tl.where(r < BLOCK_N // 2, rc, rc + N // 2)
    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    k_first, k_last = _split_k_blocks(K, BLOCK_K, pid_s, tl.num_programs(2))
    # rows past N read row 0 instead of masking (tokens past M: _token_rows): their results are never stored
    rn_safe = tl.where(rn < N, rn, 0)
    if PREFETCH > 0:  # before the wait: a prefetch only warms L2, where the later loads see every write
        prefetch_l2(_prefetch_addresses(w_ptr, rn_safe, stride_wn, k_first * BLOCK_K, tl.minimum(k_last * BLOCK_K, K),
                                        PREFETCH))
    pdl_prologue(PDL)
    rm_safe = _token_rows(rm, M)
    # float x: lanes past M are masked, not read (each would quantize a whole row it never stores)
    m_in = rm[:, None] < M
    if XQ == NO_XQ:
        xs = _load_xs(xs_ptr, rm, M, XS_PER_TOKEN)
        x_s = xs
        x_r = xs
    elif (XQ == FP8_TOKEN) | (XQ == INT8_TOKEN):  # float x, a scale per token: the producer's, from its absmax
        s, r = token_scale(_rows_absmax(x_ptr, rm_safe, m_in, stride_xm, K, BLOCK_M, SWEEP_K), XQ, M8, MIN_SCALE)
        x_s = s[:, None]
        x_r = r[:, None]
        xs = canonical_nan(s)  # the bits the producer stores, as the epilogue multiplies them in
        if SPLIT and LAST_REDUCES == 0:  # for the epilogue kernel: one writer per token
            tl.store(xs_ptr + rm, xs, mask=(rm < M) & (pid_n == 0) & (pid_s == 0))
        xs = xs[None, :]
    else:  # float x and its per-tensor scale: quantized as the identity producer does (r = 1 / s)
        xs, x_r = static_scale(xs_ptr)
        x_s = xs
    w_ptrs = w_ptr + rn_safe[:, None] * stride_wn + (k_first * BLOCK_K + rk)[None, :]
    x_ptrs = x_ptr + rm_safe[:, None] * stride_xm + (k_first * BLOCK_K + rk)[None, :]
    if BLOCK_M == 1:  # one token lane: no MMA (``_lane_products``); each K lane's own sum, summed after the loop
        if INT8:
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.int32)
        else:
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    elif INT8:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for kb in range(k_first, k_last):
        if EVEN_K:
            w = tl.load(w_ptrs, eviction_policy=EVICT_W)
            if XQ == NO_XQ:
                x = tl.load(x_ptrs)
            else:
                x = tl.load(x_ptrs, mask=m_in, other=0.0)
        else:  # the K tail reads zeros (0 and +0.0 have the same bits in int8 and FP8; they quantize to 0)
            k_in = rk[None, :] < K - kb * BLOCK_K
            w = tl.load(w_ptrs, mask=k_in, other=0.0, eviction_policy=EVICT_W)
            if XQ == NO_XQ:
                x = tl.load(x_ptrs, mask=k_in, other=0.0)
            else:
                x = tl.load(x_ptrs, mask=k_in & m_in, other=0.0)
        if (XQ == FP8_TOKEN) | (XQ == INT8_TOKEN):  # the identity producer's values, bit for bit
            x = quantized(x.to(tl.float32), x_s, x_r, XQ, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)
        elif XQ != NO_XQ:
            x = static_quantized(x.to(tl.float32), x_s, x_r, XQ, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)
        if BLOCK_M == 1:
            acc += _lane_products(w, x, INT8)
        elif INT8:
            acc = tl.dot(w, tl.trans(x), acc, out_dtype=tl.int32)
        else:
            acc = tl.dot(w, tl.trans(x), acc, out_dtype=tl.float32, max_num_imprecise_acc=IMPRECISE)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    if BLOCK_M == 1:
        acc = tl.sum(acc, axis=1)[:, None]  # [BLOCK_N, 1], as the MMA's accumulator of one token
    if SPLIT:
        part = part_ptr + (pid_s.to(tl.int64) * M + rm[None, :]) * N + rn[:, None]
        tl.store(part, acc, mask=(rn[:, None] < N) & (rm[None, :] < M))
        if LAST_REDUCES:
            tl.debug_barrier()  # every thread's partial stored before the count releases them
            lock = lock_ptr + tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)  # one per output tile
            if tl.atomic_add(lock, 1, sem="acq_rel", scope="gpu") == tl.num_programs(2) - 1:
                tl.atomic_xchg(lock, 0, sem="relaxed", scope="gpu")  # for the next call
                _epilogue(_sum_partials(part_ptr, rn, rm, M, N, tl.num_programs(2), INT8, BLOCK_N, BLOCK_M),
                          rn, rm, xs, ws_ptr, bias_ptr, out_ptr, M, N, stride_om, WS_PER_CHANNEL, HAS_BIAS, OUT)
    elif ACT_Q == NO_XQ:
        _epilogue(acc, rn, rm, xs, ws_ptr, bias_ptr, out_ptr, M, N, stride_om, WS_PER_CHANNEL, HAS_BIAS, OUT)
    else:
        _act_epilogue(acc, rn, pid_n, rm, xs, ws_ptr, bias_ptr, out_ptr, ys_ptr, M, N,
                      stride_om, WS_PER_CHANNEL, HAS_BIAS, OUT, BLOCK_N, BLOCK_M, ACT_Q, ROUND_PRODUCT, FAST_SILU,
                      Y_M8, Y_FP8, Y_NAN_CODE, Y_SATFINITE, Y_FAST_DIV)


@triton.jit
def split_k_epilogue_kernel(part_ptr, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, SPLITS, stride_om,
                            XS_PER_TOKEN: tl.constexpr, WS_PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                            OUT: tl.constexpr, INT8: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_M: tl.constexpr, PDL: tl.constexpr):
    """Sum the split-K partials ``part[0..SPLITS-1, m, n]`` in order from zero, then the epilogue; over one
    split, the epilogue of ``torch._scaled_mm``'s fp32 product (``gemm_launch.SCALED_MM_FP32``). A grid of one
    axis, N blocks first: any M fits it (a second axis takes at most 65535 blocks)."""
    pdl_prologue(PDL)
    n_blocks = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0).to(tl.int64)
    rn = (pid % n_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = (pid // n_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = _sum_partials(part_ptr, rn, rm, M, N, SPLITS, INT8, BLOCK_N, BLOCK_M)
    _epilogue(acc, rn, rm, _load_xs(xs_ptr, rm, M, XS_PER_TOKEN), ws_ptr, bias_ptr, out_ptr, M, N, stride_om,
              WS_PER_CHANNEL, HAS_BIAS, OUT)
