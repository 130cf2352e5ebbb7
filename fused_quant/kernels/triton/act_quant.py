"""Triton device code: activation + quantization in one pass (NUMERICS.md, bit for bit).

Parity with torch's CUDA math: ``exp`` is libdevice's accurate expf (what
torch's silu kernel calls; ``tl.exp`` is the approximate ex2 path), every
division is ``div_rn`` (IEEE, as nvcc compiles ``/`` without fast-math; Triton's
``/`` is approximate), rounding to int8 is ``rint`` (round-half-even) followed
by an explicit clamp, and NaN is carried by comparisons, never by
``maximum``/``clamp`` (their NaN rules differ between GPU and interpreter).
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

# ACT codes
IDENTITY: tl.constexpr = tl.constexpr(0)
RELU2: tl.constexpr = tl.constexpr(1)
SILU_AND_MUL: tl.constexpr = tl.constexpr(2)
# QUANT codes
FP8_STATIC: tl.constexpr = tl.constexpr(0)
FP8_TOKEN: tl.constexpr = tl.constexpr(1)
INT8_STATIC: tl.constexpr = tl.constexpr(2)
INT8_TOKEN: tl.constexpr = tl.constexpr(3)


@triton.jit
def _activation(x_ptr, offs, mask, D, ACT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr):
    """fp32 activation value as it enters the quantizer (T-rounded unless the profile keeps fp32)."""
    if ACT == SILU_AND_MUL:
        g = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + offs + D, mask=mask, other=0.0).to(tl.float32)
        s = tl.math.div_rn(g, 1.0 + libdevice.exp(-g)).to(T).to(tl.float32)
        y = s * u
        if ROUND_PRODUCT:
            y = y.to(T).to(tl.float32)
    elif ACT == RELU2:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.where(x < 0.0, 0.0, x)  # NaN stays NaN, like torch.relu
        y = (r * r).to(T).to(tl.float32)
    else:
        y = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return y


@triton.jit
def _clamp_keep_nan(v, lo, hi):
    return tl.where(v > hi, hi, tl.where(v < lo, lo, v))


@triton.jit
def _to_fp8_bits(v, M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr):
    c = _clamp_keep_nan(v, -M8, M8)
    bits = c.to(FP8).to(tl.uint8, bitcast=True)
    return tl.where(v != v, NAN_CODE, bits).to(tl.uint8)


@triton.jit
def _to_int8(v):
    r = libdevice.rint(v)
    r = _clamp_keep_nan(r, -128.0, 127.0)
    return tl.where(r != r, 0.0, r).to(tl.int8)


@triton.jit
def _row_absmax(y, mask):
    """max |y| along axis 1 with NaN propagating (masked lanes count as 0)."""
    a = tl.where(mask, tl.abs(y), 0.0)
    has_nan = tl.max(tl.where(mask & (y != y), 1, 0), axis=1)
    amax = tl.max(tl.where(a != a, 0.0, a), axis=1)
    return tl.where(has_nan > 0, float("nan"), amax)


@triton.jit
def _token_scale(a, QUANT: tl.constexpr, M8: tl.constexpr, MIN_SCALE: tl.constexpr):
    """(scale, multiplier-or-divisor) for a per-token row from its absmax ``a``."""
    if QUANT == FP8_TOKEN:
        s = tl.math.div_rn(a, M8)
        s = tl.where(s < MIN_SCALE, MIN_SCALE, s)  # max(a / M8, MIN) with NaN kept
        return s, s
    else:
        s = tl.math.div_rn(a, 127.0)
        inv = tl.where(a == 0.0, 0.0, tl.math.div_rn(127.0, a))
        return s, inv


@triton.jit
def _quantize(y, q_ptr, q_offs, mask, scale, QUANT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
              NAN_CODE: tl.constexpr):
    """Quantize ``y`` with a broadcastable ``scale`` term and store; see _token_scale / static callers."""
    if QUANT == FP8_STATIC:
        tl.store(q_ptr + q_offs, _to_fp8_bits(y * scale, M8, FP8, NAN_CODE), mask=mask)
    elif QUANT == FP8_TOKEN:
        tl.store(q_ptr + q_offs, _to_fp8_bits(tl.math.div_rn(y, scale), M8, FP8, NAN_CODE), mask=mask)
    elif QUANT == INT8_TOKEN:
        tl.store(q_ptr + q_offs, _to_int8(y * scale), mask=mask)
    else:
        tl.store(q_ptr + q_offs, _to_int8(tl.math.div_rn(y, scale)), mask=mask)


@triton.jit
def _canonical_nan(s):
    nan = tl.full(s.shape, 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
    return tl.where(s != s, nan, s)


@triton.jit
def act_quant_static_kernel(x_ptr, q_ptr, scale_ptr, M, D, stride_xm,
                            ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                            M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per-tensor static scale: one [BLOCK_M, BLOCK_N] tile per program, no reduction."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < D)
    y = _activation(x_ptr, rows * stride_xm + cols, mask, D, ACT, T, ROUND_PRODUCT)
    scale = tl.load(scale_ptr)
    if QUANT == FP8_STATIC:
        scale = tl.math.div_rn(1.0, scale)  # reciprocal once, then multiply (NUMERICS.md)
    _quantize(y, q_ptr, rows * D + cols, mask, scale, QUANT, M8, FP8, NAN_CODE)


@triton.jit
def act_quant_token_kernel(x_ptr, q_ptr, s_ptr, M, D, stride_xm,
                           ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                           M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr, MIN_SCALE: tl.constexpr,
                           ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per-token dynamic scale, one pass: ROWS whole rows (BLOCK_N >= D) live in registers."""
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < D)
    y = _activation(x_ptr, rows * stride_xm + cols, mask, D, ACT, T, ROUND_PRODUCT)
    a = _row_absmax(y, mask)
    s, term = _token_scale(a, QUANT, M8, MIN_SCALE)
    _quantize(y, q_ptr, rows * D + cols, mask, term[:, None], QUANT, M8, FP8, NAN_CODE)
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    tl.store(s_ptr + r, _canonical_nan(s), mask=r < M)


@triton.jit
def act_quant_token_2pass_kernel(x_ptr, q_ptr, s_ptr, M, D, stride_xm,
                                 ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                 ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                 NAN_CODE: tl.constexpr, MIN_SCALE: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per-token for rows too wide for registers: pass 1 reduces absmax, pass 2 recomputes and stores."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    amax = tl.zeros([1, BLOCK_N], tl.float32)
    nan_seen = tl.zeros([1, BLOCK_N], tl.int32)
    for start in range(0, D, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        mask = cols < D
        y = _activation(x_row, cols, mask, D, ACT, T, ROUND_PRODUCT)
        a = tl.where(mask, tl.abs(y), 0.0)
        nan_seen = nan_seen | tl.where(a != a, 1, 0)
        amax = tl.where(a > amax, a, amax)
    a = tl.max(amax, axis=1)
    a = tl.where(tl.max(nan_seen, axis=1) > 0, float("nan"), a)
    s, term = _token_scale(a, QUANT, M8, MIN_SCALE)
    for start in range(0, D, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        mask = cols < D
        y = _activation(x_row, cols, mask, D, ACT, T, ROUND_PRODUCT)
        _quantize(y, q_ptr + row * D, cols, mask, term[:, None], QUANT, M8, FP8, NAN_CODE)
    tl.store(s_ptr + row + tl.arange(0, 1), _canonical_nan(s))


@triton.jit
def act_quant_token_persistent_kernel(x_ptr, q_ptr, s_ptr, y_ptr, M, D, stride_xm,
                                      ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                      ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                      NAN_CODE: tl.constexpr, MIN_SCALE: tl.constexpr, BLOCK_N: tl.constexpr,
                                      USE_SCRATCH: tl.constexpr, Y: tl.constexpr):
    """Per-token, two sweeps per row, a bounded number of programs looping over rows.

    Sweep 1 computes y once, reduces |y| and (USE_SCRATCH) parks y in this program's scratch
    row (dtype Y: T when y is T-valued, so exact); sweep 2 quantizes from the scratch row, which
    the bounded grid keeps L2-resident, or recomputes y from x. HBM sees x once and q once.
    """
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    y_row = y_ptr + pid.to(tl.int64) * D
    for row in range(pid, M, nprog):
        x_row = x_ptr + row.to(tl.int64) * stride_xm
        amax = tl.zeros([1, BLOCK_N], tl.float32)
        nan_seen = tl.zeros([1, BLOCK_N], tl.int32)
        for start in range(0, D, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)[None, :]
            mask = cols < D
            y = _activation(x_row, cols, mask, D, ACT, T, ROUND_PRODUCT)
            if USE_SCRATCH:
                tl.store(y_row + cols, y.to(Y), mask=mask)
            a = tl.where(mask, tl.abs(y), 0.0)
            nan_seen = nan_seen | tl.where(a != a, 1, 0)
            amax = tl.where(a > amax, a, amax)
        a = tl.max(amax, axis=1)
        a = tl.where(tl.max(nan_seen, axis=1) > 0, float("nan"), a)
        s, term = _token_scale(a, QUANT, M8, MIN_SCALE)
        tl.debug_barrier()  # scratch writes of sweep 1 visible to every thread of the program
        for start in range(0, D, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)[None, :]
            mask = cols < D
            if USE_SCRATCH:
                y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
            else:
                y = _activation(x_row, cols, mask, D, ACT, T, ROUND_PRODUCT)
            _quantize(y, q_ptr + row.to(tl.int64) * D, cols, mask, term[:, None], QUANT, M8, FP8, NAN_CODE)
        tl.debug_barrier()  # the next row's sweep 1 must not overwrite scratch still being read
        tl.store(s_ptr + row + tl.arange(0, 1), _canonical_nan(s))


@triton.jit
def act_quant_static_flat_kernel(x_ptr, q_ptr, scale_ptr, N,
                                 ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                 ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                 NAN_CODE: tl.constexpr, BLOCK: tl.constexpr):
    """Per-tensor static scale over a contiguous input seen as one flat vector (relu2 and
    identity only: silu_and_mul needs the row structure to pair gate with up)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    y = _activation(x_ptr, offs, mask, 0, ACT, T, ROUND_PRODUCT)
    scale = tl.load(scale_ptr)
    if QUANT == FP8_STATIC:
        scale = tl.math.div_rn(1.0, scale)
    _quantize(y, q_ptr, offs, mask, scale, QUANT, M8, FP8, NAN_CODE)
