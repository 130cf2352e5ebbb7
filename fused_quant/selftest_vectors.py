"""Known-answer vectors for ``fused-quant selftest``, written by hand from docs/NUMERICS.md.

Each vector: activation, key name, numerics profile, input dtype, the row(s) of
input values (exact in the input dtype), the static scale (or None), and the
exact expected output: quantized bytes (FP8 codes / int8 values) and the scale
as float32 bit patterns. They do not come from ``reference.py``; they check it.
"""

from __future__ import annotations

from dataclasses import dataclass

NAN = float("nan")
INF = float("inf")


@dataclass(frozen=True)
class KnownAnswer:
    name: str
    act: str
    key: str
    numerics: str
    rows: tuple[tuple[float, ...], ...]
    scale: float | None
    q: tuple[tuple[int, ...], ...]  # FP8 codes as uint8, int8 as signed values
    scale_bits: tuple[int, ...] | None  # per-token scales, float32 bit patterns
    dtype: str = "bfloat16"


VECTORS: tuple[KnownAnswer, ...] = (
    # relu2 -> y = [0, 0, 0.25, 9, 400, NaN, Inf, 0]; e4m3fn codes: 0.25 = 0x28, 9 = 1.001b*2^3 = 0x51,
    # 400 = 1.5625*2^8 ties between 1.5 and 1.625 -> even 1.5 -> 384 = 0x7c, NaN -> 0x7f,
    # Inf -> clamp 448 = 0x7e.
    KnownAnswer("relu2 fp8 static: RNE tie, NaN, saturation", "relu2", "fp8_static_tensor", "default",
                ((-1.0, 0.0, 0.5, 3.0, 20.0, NAN, INF, -INF),), 1.0,
                ((0x00, 0x00, 0x28, 0x51, 0x7C, 0x7F, 0x7E, 0x00),), None),
    # scale 0.5 -> inv 2: 1 -> 2 = 0x40; 16 -> 512 -> 448 = 0x7e; 2^-5 -> 2^-10*2 = 2^-9 = 0x01 (min
    # subnormal); 3*2^-7 -> 9*2^-13 = 0.5625 * 2^-9 -> rounds up to 0x01; 2^-6 -> 2^-11 -> 0x00.
    KnownAnswer("relu2 fp8 static: subnormals", "relu2", "fp8_static_tensor", "default",
                ((1.0, 16.0, 0.03125, 0.0234375, 0.015625, -2.0),), 0.5,
                ((0x40, 0x7E, 0x01, 0x01, 0x00, 0x00),), None),
    # identity int8 static scale 1: rne ties to even, saturation to [-128, 127], NaN -> 0.
    KnownAnswer("identity int8 static: RNE and saturation", "identity", "int8_static_tensor", "default",
                ((2.5, 3.5, -2.5, -0.5, 0.5, 127.5, -128.5, 1000.0, NAN),), 1.0,
                ((2, 4, -2, 0, 0, 127, -128, 127, 0),), None),
    # relu2 int8 static scale 0.25: y = [4, 2.25, 0, 400, NaN] -> [16, 9, 0, 1600 -> 127, 0].
    KnownAnswer("relu2 int8 static", "relu2", "int8_static_tensor", "default",
                ((2.0, 1.5, -3.0, 20.0, NAN),), 0.25, ((16, 9, 0, 127, 0),), None),
    # silu_and_mul row: gate [100, 0, -100, 8] | up [1, 5, 3, -0.5]. silu(100) = 100 (exp(-100) is
    # lost in 1 + exp), silu(0) = 0, silu(-100) = -100 / inf = -0, bf16(silu(8) = 7.99732) = 8.
    # y = [100, 0, -0, -4]; int8: s = 100/127 = 0x3f499326, inv = 1.27 -> [127, 0, 0, rne(-5.08) = -5].
    # A second, all-zero row: s = 0, q = 0.
    KnownAnswer("silu_and_mul int8 per-token", "silu_and_mul", "int8_dynamic_token", "default",
                ((100.0, 0.0, -100.0, 8.0, 1.0, 5.0, 3.0, -0.5), (0.0,) * 8), None,
                ((127, 0, 0, -5), (0, 0, 0, 0)), (0x3F499326, 0x00000000)),
    # same row, fp8: s = 100/448 = 0x3e649249; 100/s = 448 = 0x7e; -0/s = -0 = 0x80; -4/s = -17.92 ->
    # 1.12*2^4 -> 1.125 -> 0xd9. All-zero row: s = 1/(448*512) = 0x36924925, q = 0.
    KnownAnswer("silu_and_mul fp8 per-token, -0 kept", "silu_and_mul", "fp8_dynamic_token", "default",
                ((100.0, 0.0, -100.0, 8.0, 1.0, 5.0, 3.0, -0.5), (0.0,) * 8), None,
                ((0x7E, 0x00, 0x80, 0xD9), (0x00,) * 4), (0x3E649249, 0x36924925)),
    # profiles differ: gate [100, 100] | up [1 + 2^-7, 1]. default rounds y = 100.78125 to bf16 101:
    # a = 101, s = 0x3f4b972e, inv = 1.2574258 -> [127, rne(125.74) = 126].
    KnownAnswer("silu_and_mul int8 per-token, default profile", "silu_and_mul", "int8_dynamic_token", "default",
                ((100.0, 100.0, 1.0078125, 1.0),), None, ((127, 126),), (0x3F4B972E,)),
    # hcu keeps y = 100.78125 in fp32: a = 100.78125, s = 0x3f4b264d, inv = 1.2601551 -> [127, rne(126.016)].
    KnownAnswer("silu_and_mul int8 per-token, hcu profile", "silu_and_mul", "int8_dynamic_token", "hcu",
                ((100.0, 100.0, 1.0078125, 1.0),), None, ((127, 126),), (0x3F4B264D,)),
    # a NaN anywhere in a row: scale is the canonical NaN 0x7fc00000; fp8 codes all NaN (0x7f),
    # int8 values all 0. An Inf row: int8 s = Inf, inv = 0 -> q = [NaN -> 0, 0, 0].
    KnownAnswer("identity fp8 per-token, NaN row", "identity", "fp8_dynamic_token", "default",
                ((1.0, NAN, 2.0),), None, ((0x7F, 0x7F, 0x7F),), (0x7FC00000,)),
    KnownAnswer("identity int8 per-token, NaN and Inf rows", "identity", "int8_dynamic_token", "default",
                ((1.0, NAN, 2.0), (INF, 1.0, -1.0)), None, ((0, 0, 0), (0, 0, 0)), (0x7FC00000, 0x7F800000)),
)
