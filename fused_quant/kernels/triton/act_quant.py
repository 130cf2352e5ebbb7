"""Triton device code: activation + quantization in one pass (docs/NUMERICS.md, bit for bit).

Parity with torch's CUDA math: ``exp`` is libdevice's accurate expf (what
torch's silu kernel calls; ``tl.exp`` is the approximate ex2 path), every
division is ``div_rn`` (IEEE, as nvcc compiles ``/`` without fast-math; Triton's
``/`` is approximate), rounding to int8 is ``float2int_rn`` (round-half-even,
saturating, NaN -> 0) followed by an integer clamp, and NaN is carried by
comparisons, integer maxima over bit patterns or ``maximum(propagate_nan=ALL)``,
never by plain ``maximum``/``clamp`` (their NaN rules differ between GPU and
interpreter). On NVIDIA GPUs the e4m3fn conversion itself saturates and maps every NaN
to 0x7F (``SATFINITE``); elsewhere the clamp and the NaN code are explicit. Every
instruction per element counts: at H = 14336 these kernels are close to the issue limit
of the SMs, not only to the memory bandwidth. One exception to the accurate math: with
``FAST_SILU`` the bf16 / fp16 silu uses ex2.approx and rcp.approx (``silu``; measured on sm_90
to round to torch's T for all 65,536 inputs, two fp16 gates patched with torch's value).

With ``FAST_DIV`` the quantizers' divisions by a per-tensor or per-row scale are computed
without a per-element ``div_rn``: the correctly rounded reciprocal once, then a product and two
FMA correction steps (Markstein), which give the IEEE quotient wherever it can matter (see
``_quotient``; proven on the GPU over all 2^32 fp32 inputs for 1,512 scales). The same trick for
silu's per-element divisor was exact too but slower than ``div_rn`` there.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

from fused_quant.kernels.triton.pdl import pdl_prologue

# ACT codes
IDENTITY: tl.constexpr = tl.constexpr(0)
RELU2: tl.constexpr = tl.constexpr(1)
SILU_AND_MUL: tl.constexpr = tl.constexpr(2)
# QUANT codes
FP8_STATIC: tl.constexpr = tl.constexpr(0)
FP8_TOKEN: tl.constexpr = tl.constexpr(1)
INT8_STATIC: tl.constexpr = tl.constexpr(2)
INT8_TOKEN: tl.constexpr = tl.constexpr(3)
# quotients outside [2^-12, 2^20] quantize to +-0 resp. saturate whatever their last bits are
_Q_LO: tl.constexpr = tl.constexpr(0.000244140625)
_Q_HI: tl.constexpr = tl.constexpr(1048576.0)
# static scales for which the correction steps stay exact (no underflow in x - y * s, r normal)
_S_LO: tl.constexpr = tl.constexpr(2.0 ** -90)
_S_HI: tl.constexpr = tl.constexpr(2.0 ** 126)


@triton.jit
def _quotient(x, s, r, BOUNDED: tl.constexpr):
    """``x / s`` as the quantizers see it, for a per-tensor scale in [2^-90, 2^126] or a per-token
    FP8 scale (in [2^-18, 2^120], or Inf / NaN for a row holding Inf / NaN), ``r = div_rn(1, s)``.

    ``y0 = x * r`` is within 1.5 ulp of x / s; one FMA correction makes it faithful, the second
    is Markstein's (r is the correctly rounded reciprocal and the residual ``x - y1 * s`` is exact
    because nothing underflows while ``|y0|`` is in [2^-12, 2^20]), so there the result is
    ``div_rn(x, s)`` bit for bit. Outside that window ``y0`` itself is returned: the quotient then
    quantizes to +-0 or saturates whatever its last bits, and NaN, Inf and signed zeros come out
    as IEEE division gives them (x * 0 for s = Inf). Proven on the GPU for every fp32 x against
    ``div_rn`` (tests/gpu/test_fast_paths_gpu.py). Cheaper than a sign fix-up plus NaN select.
    """
    ns = -s  # per row / tensor: the residuals x - y * s as fma(y, -s, x), no per-element negation
    y0 = x * r
    y1 = tl.fma(tl.fma(y0, ns, x), r, y0)
    y2 = tl.fma(tl.fma(y1, ns, x), r, y1)
    a = tl.abs(y0)
    if BOUNDED:  # |x / s| <= ~M8 or x * r is 0 / NaN: no quotient beyond the window's top
        inside = a >= _Q_LO
    else:
        inside = (a >= _Q_LO) & (a <= _Q_HI)
    return tl.where(inside, y2, y0)


_LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)


@triton.jit
def _rcp_approx(d):
    """``rcp.approx.ftz.f32`` (one MUFU.RCP): results below 2^-126 flush to 0."""
    return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [d], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def silu(g, T: tl.constexpr, FAST_SILU: tl.constexpr):
    """fp32 ``g / (1 + exp(-g))`` as torch's CUDA silu computes it, or (FAST_SILU) a value that rounds
    to the same T (bf16 or fp16).

    Exact path: libdevice's accurate expf and ``div_rn``, about 20 instructions per element.
    FAST_SILU (bf16 and fp16 inputs on the NVIDIA archs whose heuristics enable it: sm_90):
    ``ex2.approx`` and ``rcp.approx`` (two MUFU ops and four FP32 ops). It is not torch's fp32 value,
    but rounded to T it equals torch's for every one of the 65,536 inputs of bf16, and of fp16 but
    two, which is all the spec keeps of it (s = T(silu(g))); measured on the H200
    (tests/gpu/test_fast_paths_gpu.py). Numerator and denominator are scaled by 1/4 (exactly:
    ``fma(e, 1/4, 1/4)`` is ``RN(1 + e) / 4``) so the reciprocal of a denominator up to FLT_MAX stays
    above 2^-126 and is not flushed: without the scaling g in {-87.5, -88, -88.5} gave -0 where torch
    gives a normal bf16. exp(-g) = +Inf (g < -88.72) gives -0 like torch's ``g / Inf``. The two fp16
    gates, g = -2.724609375 and -4.921875, have a silu within 6e-9 (about an fp32 ulp) of an fp16
    rounding tie: the approximation lands on the other side of it than torch's fp32 value, so they
    take torch's fp16 value (2 compares and 2 selects).
    """
    if FAST_SILU:
        d4 = tl.fma(tl.exp2(g * -_LOG2E), 0.25, 0.25)
        s = (g * 0.25) * _rcp_approx(d4)
        if T == tl.float16:
            s = tl.where(g == -2.724609375, -0.1676025390625, s)
            s = tl.where(g == -4.921875, -0.035614013671875, s)
    else:
        # exp(-g) as exp(g * -1): a free operand negation, where Triton's unary minus is 0 - g (an
        # instruction per element); exp(+-0) = 1 either way
        s = tl.math.div_rn(g, 1.0 + libdevice.exp(g * -1.0))
    return s


@triton.jit
def _activation(x_ptr, offs, mask, D, ACT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                FAST_SILU: tl.constexpr):
    """fp32 activation value as it enters the quantizer (T-rounded unless the profile keeps fp32).
    Masked lanes load 0 and so hold y = 0 (the reductions rely on it)."""
    if ACT == SILU_AND_MUL:
        g = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + offs + D, mask=mask, other=0.0).to(tl.float32)
        s = silu(g, T, FAST_SILU).to(T).to(tl.float32)
        y = s * u
        if ROUND_PRODUCT:
            y = y.to(T).to(tl.float32)
    elif ACT == RELU2:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        r = max_nan(x, 0.0)  # NaN stays NaN, like torch.relu
        y = (r * r).to(T).to(tl.float32)
    else:
        y = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return y


@triton.jit
def _clamp_keep_nan(v, lo, hi):
    return tl.where(v > hi, hi, tl.where(v < lo, lo, v))


@triton.jit
def max_nan(a, b):
    """max that propagates NaN (PTX ``max.NaN``; numpy's maximum in the interpreter)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _to_fp8(v, M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr):
    """``fp8(clamp(v, -M8, M8))`` with every NaN -> NAN_CODE, as FP8 values.

    SATFINITE: the conversion itself does both (NVIDIA's ``cvt.rn.satfinite.e4m3x2.f32`` with M8 the
    format's max 448: +-Inf and |v| > 448 -> +-448, every NaN -> 0x7F, measured on the H200 for all
    2^32 fp32 inputs); elsewhere the clamp and the NaN select are explicit.
    """
    if SATFINITE:
        q = v.to(FP8)
    else:
        c = _clamp_keep_nan(v, -M8, M8)
        bits = tl.where(v != v, NAN_CODE, c.to(FP8).to(tl.uint8, bitcast=True)).to(tl.uint8)
        q = bits.to(FP8, bitcast=True)
    return q


@triton.jit
def _to_int8(v):
    """rne, saturate to [-128, 127], NaN -> 0: ``cvt.rni.s32.f32`` does rne, saturation to int32
    and NaN -> 0 in one instruction; the int8 clamp is on integers."""
    i = libdevice.float2int_rn(v)
    return tl.minimum(tl.maximum(i, -128), 127).to(tl.int8)


@triton.jit
def row_absmax(y):
    """max |y| along axis 1 with NaN propagating (masked lanes hold y = 0): an integer max over
    the bit patterns of |y|, which order like the values and put every NaN above Inf."""
    bits = y.to(tl.int32, bitcast=True) & 0x7FFFFFFF
    return tl.max(bits, axis=1).to(tl.float32, bitcast=True)


@triton.jit
def token_scale(a, QUANT: tl.constexpr, M8: tl.constexpr, MIN_SCALE: tl.constexpr):
    """(scale, r) for a per-token row from its absmax ``a``: r is the multiplier for int8
    (``127 / a``, 0 for an all-zero row) and the correctly rounded ``1 / scale`` for FP8."""
    if QUANT == FP8_TOKEN:
        s = tl.math.div_rn(a, M8)
        s = tl.where(s < MIN_SCALE, MIN_SCALE, s)  # max(a / M8, MIN) with NaN kept
        return s, tl.math.div_rn(1.0, s)
    else:
        s = tl.math.div_rn(a, 127.0)
        inv = tl.where(a == 0.0, 0.0, tl.math.div_rn(127.0, a))
        return s, inv


@triton.jit
def quantized(y, s, r, QUANT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr,
              SATFINITE: tl.constexpr, FAST_DIV: tl.constexpr):
    """``y`` quantized with broadcastable scale ``s`` and ``r`` (``token_scale``; for static keys
    ``r = div_rn(1, s)``): the producers' values, also what the small-M GEMM quantizes a per-token key's
    float input to (a per-tensor key's: ``static_quantized``)."""
    if QUANT == FP8_STATIC:
        q = _to_fp8(y * r, M8, FP8, NAN_CODE, SATFINITE)
    elif QUANT == INT8_TOKEN:
        q = _to_int8(y * r)
    else:
        if FAST_DIV:
            v = _quotient(y, s, r, QUANT == FP8_TOKEN)  # per-token FP8: |y| <= the row's absmax
        else:
            v = tl.math.div_rn(y, s)
        if QUANT == FP8_TOKEN:
            q = _to_fp8(v, M8, FP8, NAN_CODE, SATFINITE)
        else:
            q = _to_int8(v)
    return q


@triton.jit
def _quantize(y, q_ptr, q_offs, mask, s, r, QUANT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
              NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_DIV: tl.constexpr):
    """Quantize ``y`` (``quantized``) and store."""
    tl.store(q_ptr + q_offs, quantized(y, s, r, QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV), mask=mask)


@triton.jit
def static_scale(scale_ptr):
    """A per-tensor scale and its reciprocal ``r = 1 / s``, which FP8 multiplies by."""
    s = tl.load(scale_ptr)
    return s, tl.math.div_rn(1.0, s)


@triton.jit
def static_quantized(y, s, r, QUANT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr,
                     SATFINITE: tl.constexpr, FAST_DIV: tl.constexpr):
    """``quantized`` for a per-tensor scale ``s`` (``r = div_rn(1, s)``, ``static_scale``): the int8
    division takes the fast path only for scales in its proven range (a uniform branch; validated
    static scales always are). FP8 multiplies by ``r``."""
    if FAST_DIV and QUANT == INT8_STATIC:
        if (s >= _S_LO) & (s <= _S_HI):
            q = quantized(y, s, r, QUANT, M8, FP8, NAN_CODE, SATFINITE, True)
        else:
            q = quantized(y, s, r, QUANT, M8, FP8, NAN_CODE, SATFINITE, False)
    else:
        q = quantized(y, s, r, QUANT, M8, FP8, NAN_CODE, SATFINITE, False)
    return q


@triton.jit
def _quantize_static(y, q_ptr, q_offs, mask, scale_ptr, QUANT: tl.constexpr, M8: tl.constexpr,
                     FP8: tl.constexpr, NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_DIV: tl.constexpr):
    """Quantize ``y`` with the per-tensor scale at ``scale_ptr`` (``static_quantized``) and store."""
    s, r = static_scale(scale_ptr)
    tl.store(q_ptr + q_offs, static_quantized(y, s, r, QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV), mask=mask)


@triton.jit
def canonical_nan(s):
    nan = tl.full(s.shape, 0x7FC00000, tl.int32).to(tl.float32, bitcast=True)
    return tl.where(s != s, nan, s)


@triton.jit
def act_quant_static_kernel(x_ptr, q_ptr, scale_ptr, M, D, stride_xm,
                            ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                            M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr,
                            FAST_SILU: tl.constexpr,
                            FAST_DIV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr):
    """Per-tensor static scale: one [BLOCK_M, BLOCK_N] tile per program, no reduction."""
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < D)
    y = _activation(x_ptr, rows * stride_xm + cols, mask, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
    _quantize_static(y, q_ptr, rows * D + cols, mask, scale_ptr, QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)


@triton.jit
def act_quant_static_flat_kernel(x_ptr, q_ptr, scale_ptr, N,
                                 ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                 ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                 NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_SILU: tl.constexpr,
                                 FAST_DIV: tl.constexpr,
                                 BLOCK: tl.constexpr, PDL: tl.constexpr):
    """Per-tensor static scale over a contiguous input seen as one flat vector (relu2 and
    identity only: silu_and_mul needs the row structure to pair gate with up)."""
    pdl_prologue(PDL)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    y = _activation(x_ptr, offs, mask, 0, ACT, T, ROUND_PRODUCT, FAST_SILU)
    _quantize_static(y, q_ptr, offs, mask, scale_ptr, QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)


@triton.jit
def _finish_rows(y, mask, q_ptr, q_offs, s_ptr, r_offs, r_mask, QUANT: tl.constexpr, M8: tl.constexpr,
                 FP8: tl.constexpr, NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, MIN_SCALE: tl.constexpr,
                 FAST_DIV: tl.constexpr):
    """Per-token tail for whole rows held in registers: absmax, scale, quantize, store."""
    s, r = token_scale(row_absmax(y), QUANT, M8, MIN_SCALE)
    _quantize(y, q_ptr, q_offs, mask, s[:, None], r[:, None], QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)
    tl.store(s_ptr + r_offs, canonical_nan(s), mask=r_mask)


@triton.jit
def act_quant_token_kernel(x_ptr, q_ptr, s_ptr, M, D, stride_xm,
                           ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                           M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr,
                           FAST_SILU: tl.constexpr,
                           MIN_SCALE: tl.constexpr, FAST_DIV: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                           PDL: tl.constexpr):
    """Per-token dynamic scale, one pass: ROWS whole rows (BLOCK_N >= D) live in registers."""
    pdl_prologue(PDL)
    r1 = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rows = r1[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < D)
    y = _activation(x_ptr, rows * stride_xm + cols, mask, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
    _finish_rows(y, mask, q_ptr, rows * D + cols, s_ptr, r1, r1 < M, QUANT, M8, FP8, NAN_CODE, SATFINITE, MIN_SCALE,
                 FAST_DIV)


@triton.jit
def act_quant_token_chunks_kernel(x_ptr, q_ptr, s_ptr, M, D, stride_xm,
                                  ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                  ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                  NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_SILU: tl.constexpr,
                                  MIN_SCALE: tl.constexpr,
                                  FAST_DIV: tl.constexpr, NCHUNK: tl.constexpr, CHUNK: tl.constexpr, PDL: tl.constexpr):
    """Per-token, one pass, one row per program held in registers as NCHUNK chunks of CHUNK
    columns: a row of 7 x 2048 is not padded to 16384 lanes (all computing silu), and y lives in
    registers as T where it is T-valued (half the registers of fp32)."""
    pdl_prologue(PDL)
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    q_row = q_ptr + row * D
    cols = tl.arange(0, CHUNK)[None, :]
    amax = tl.zeros([1, CHUNK], tl.float32)
    ys = ()
    for c in tl.static_range(NCHUNK):
        cc = c * CHUNK + cols
        y = _activation(x_row, cc, cc < D, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
        amax = max_nan(amax, tl.abs(y))  # masked lanes hold y = 0
        if ROUND_PRODUCT or ACT != SILU_AND_MUL:
            ys = ys + (y.to(T),)  # exact: y is T-valued
        else:
            ys = ys + (y,)
    s, r = token_scale(row_absmax(amax), QUANT, M8, MIN_SCALE)
    for c in tl.static_range(NCHUNK):
        cc = c * CHUNK + cols
        _quantize(ys[c].to(tl.float32), q_row, cc, cc < D, s[:, None], r[:, None], QUANT, M8, FP8, NAN_CODE,
                  SATFINITE, FAST_DIV)
    tl.store(s_ptr + row + tl.arange(0, 1), canonical_nan(s))


@triton.jit
def act_quant_token_split_absmax_kernel(x_ptr, part_ptr, M, D, stride_xm,
                                        ACT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                                        FAST_SILU: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr):
    """Per-token with each row split over programs, launch 1 of 2: program (row, p) reduces |y| over
    columns ``p*BLOCK_N..`` of its row to ``part[row, p]`` (NaN propagating, as ``row_absmax``)."""
    pdl_prologue(PDL)
    row = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    cols = p * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    y = _activation(x_ptr + row * stride_xm, cols, cols < D, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
    tl.store(part_ptr + row * tl.num_programs(1) + p + tl.arange(0, 1), row_absmax(y))


@triton.jit
def act_quant_token_split_kernel(x_ptr, q_ptr, s_ptr, part_ptr, M, D, stride_xm,
                                 ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                 ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                 NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_SILU: tl.constexpr,
                                 MIN_SCALE: tl.constexpr, FAST_DIV: tl.constexpr, BLOCK_N: tl.constexpr,
                                 PARTS: tl.constexpr, PDL: tl.constexpr):
    """Launch 2 of 2: program (row, p) takes the row's absmax from its ``num_programs(1)`` parts (the
    maximum of the parts' maxima is the row's, bit for bit), computes y of its columns again and
    quantizes them; program p = 0 stores the row's scale. A short piece of a row per program instead of
    a whole row: at a few tokens, one program per row leaves all but one SM per row idle."""
    pdl_prologue(PDL)
    row = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    nparts = tl.num_programs(1)
    k = tl.arange(0, PARTS)[None, :]
    a = row_absmax(tl.load(part_ptr + row * nparts + k, mask=k < nparts, other=0.0))  # parts are >= +0.0
    s, r = token_scale(a, QUANT, M8, MIN_SCALE)
    cols = p * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    mask = cols < D
    y = _activation(x_ptr + row * stride_xm, cols, mask, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
    _quantize(y, q_ptr + row * D, cols, mask, s[:, None], r[:, None], QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)
    one = tl.arange(0, 1)
    tl.store(s_ptr + row + one, canonical_nan(s), mask=(one == 0) & (p == 0))


@triton.jit
def _row_sweep_absmax(x_row, y_row, D, ACT: tl.constexpr, T: tl.constexpr, ROUND_PRODUCT: tl.constexpr,
                      FAST_SILU: tl.constexpr, BLOCK_N: tl.constexpr,
                      USE_SCRATCH: tl.constexpr, Y: tl.constexpr,
                      STAGES: tl.constexpr):
    """Sweep 1 of the two-sweep kernels: absmax of one row (NaN propagating); with USE_SCRATCH
    y is also parked in ``y_row``."""
    amax = tl.zeros([1, BLOCK_N], tl.float32)
    for start in tl.range(0, D, BLOCK_N, num_stages=STAGES):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        mask = cols < D
        y = _activation(x_row, cols, mask, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
        if USE_SCRATCH:
            tl.store(y_row + cols, y.to(Y), mask=mask)
        amax = max_nan(amax, tl.abs(y))  # masked lanes hold y = 0
    return row_absmax(amax)


@triton.jit
def _row_sweep_quantize(x_row, y_row, q_row, D, s, r, ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                        ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr, NAN_CODE: tl.constexpr,
                        SATFINITE: tl.constexpr, FAST_SILU: tl.constexpr, FAST_DIV: tl.constexpr, BLOCK_N: tl.constexpr,
                        USE_SCRATCH: tl.constexpr, STAGES: tl.constexpr):
    """Sweep 2: quantize the row from the scratch row (USE_SCRATCH) or by recomputing y from x."""
    for start in tl.range(0, D, BLOCK_N, num_stages=STAGES):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        mask = cols < D
        if USE_SCRATCH:
            y = tl.load(y_row + cols, mask=mask, other=0.0).to(tl.float32)
        else:
            y = _activation(x_row, cols, mask, D, ACT, T, ROUND_PRODUCT, FAST_SILU)
        _quantize(y, q_row, cols, mask, s[:, None], r[:, None], QUANT, M8, FP8, NAN_CODE, SATFINITE, FAST_DIV)


@triton.jit
def act_quant_token_2pass_kernel(x_ptr, q_ptr, s_ptr, M, D, stride_xm,
                                 ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                 ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                 NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_SILU: tl.constexpr,
                                 MIN_SCALE: tl.constexpr,
                                 FAST_DIV: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr):
    """Per-token for rows too wide for registers: pass 1 reduces absmax, pass 2 recomputes and stores."""
    pdl_prologue(PDL)
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    a = _row_sweep_absmax(x_row, x_row, D, ACT, T, ROUND_PRODUCT, FAST_SILU, BLOCK_N, False, T, STAGES)
    s, r = token_scale(a, QUANT, M8, MIN_SCALE)
    _row_sweep_quantize(x_row, x_row, q_ptr + row * D, D, s, r, ACT, QUANT, T, ROUND_PRODUCT, M8, FP8, NAN_CODE,
                        SATFINITE, FAST_SILU, FAST_DIV, BLOCK_N, False, STAGES)
    tl.store(s_ptr + row + tl.arange(0, 1), canonical_nan(s))


@triton.jit
def act_quant_token_persistent_kernel(x_ptr, q_ptr, s_ptr, y_ptr, M, D, stride_xm,
                                      ACT: tl.constexpr, QUANT: tl.constexpr, T: tl.constexpr,
                                      ROUND_PRODUCT: tl.constexpr, M8: tl.constexpr, FP8: tl.constexpr,
                                      NAN_CODE: tl.constexpr, SATFINITE: tl.constexpr, FAST_SILU: tl.constexpr,
                                      MIN_SCALE: tl.constexpr,
                                      FAST_DIV: tl.constexpr, BLOCK_N: tl.constexpr, USE_SCRATCH: tl.constexpr,
                                      Y: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr):
    """Per-token, two sweeps per row, a bounded number of programs looping over rows.

    Sweep 1 computes y once, reduces |y| and (USE_SCRATCH) parks y in this program's scratch
    row (dtype Y: T when y is T-valued, so exact); sweep 2 quantizes from the scratch row, which
    the bounded grid keeps L2-resident, or recomputes y from x. HBM sees x once and q once.
    STAGES > 1 lets the compiler pipeline each sweep's chunk loads.
    """
    pdl_prologue(PDL)
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    y_row = y_ptr + pid.to(tl.int64) * D
    for row in range(pid, M, nprog):
        x_row = x_ptr + row.to(tl.int64) * stride_xm
        a = _row_sweep_absmax(x_row, y_row, D, ACT, T, ROUND_PRODUCT, FAST_SILU, BLOCK_N, USE_SCRATCH, Y,
                              STAGES)
        s, r = token_scale(a, QUANT, M8, MIN_SCALE)
        tl.debug_barrier()  # scratch writes of sweep 1 visible to every thread of the program
        _row_sweep_quantize(x_row, y_row, q_ptr + row.to(tl.int64) * D, D, s, r, ACT, QUANT, T, ROUND_PRODUCT,
                            M8, FP8, NAN_CODE, SATFINITE, FAST_SILU, FAST_DIV, BLOCK_N, USE_SCRATCH, STAGES)
        tl.debug_barrier()  # the next row's sweep 1 must not overwrite scratch still being read
        tl.store(s_ptr + row + tl.arange(0, 1), canonical_nan(s))
