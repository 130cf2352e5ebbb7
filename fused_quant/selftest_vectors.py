"""Known-answer vectors for ``fused-quant selftest``, written by hand from docs/NUMERICS.md.

Each vector: activation, key name, numerics profile, input dtype, the row(s) of
input values (exact in the input dtype), the static scale (or None), and the
exact expected output: quantized bytes (FP8 codes / int8 values) and the scale
as float32 bit patterns. They do not come from ``reference.py``; they check it.
FP8 vectors are written for one format (``fp8``): e4m3fn (NVIDIA, OCP) or e4m3fnuz
(gfx94x: M8 = 224, NaN 0x80, exponent bias 8); a node runs those of its own format.

Some values sit where a plausible misreading of the spec gives other bytes: a
quotient one fp32 ulp from a rounding tie (division against a product with the
rounded reciprocal, which the spec uses where it says so), a square or a silu
whose rounding to the input dtype moves a code, saturation below -128.
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
    fp8: str = "e4m3fn"  # the FP8 format of ``q``'s codes (FP8 keys only)


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
    # identity int8 static scale 1: rne ties to even, saturation to [-128, 127] (-200 -> -128, where a wrapping
    # cast gives 56), NaN -> 0.
    KnownAnswer("identity int8 static: RNE and saturation", "identity", "int8_static_tensor", "default",
                ((2.5, 3.5, -2.5, -0.5, 0.5, 127.5, -200.0, 1000.0, NAN),), 1.0,
                ((2, 4, -2, 0, 0, 127, -128, 127, 0),), None),
    # int8 static divides: s = fp32(0.3) = 0.300000012, 2.25 / s = 7.4999997 -> 7; 2.25 times the rounded
    # reciprocal 3.3333333 is 7.5 in fp32, a tie -> 8.
    KnownAnswer("identity int8 static: a quotient, not a reciprocal's product", "identity", "int8_static_tensor",
                "default", ((-2.25, 2.25, 1.5),), 0.3, ((-7, 7, 5),), None),
    # FP8 static multiplies by r = fp32(1 / fp32(0.9)) = 1.1111112: 0.703125 * r = 0.78125006, above the tie
    # 0.78125 of 0.75 (0x34) and 0.8125 (0x35) -> 0x35; the quotient 0.703125 / s is the tie itself -> even 0x34.
    # 1 * r -> 1.125 (0x39).
    KnownAnswer("identity fp8 static: the reciprocal's product", "identity", "fp8_static_tensor", "default",
                ((-0.703125, 0.703125, 1.0),), 0.9, ((0xB5, 0x35, 0x39),), None),
    # relu2 rounds the square to the input dtype: 1.03125^2 = 1.0634765625 -> bf16 1.0625, the e4m3 tie of 1.0
    # and 1.125 -> even 1.0 (0x38); the unrounded square would give 1.125 (0x39).
    KnownAnswer("relu2 fp8 static: the square rounded to bf16", "relu2", "fp8_static_tensor", "default",
                ((1.03125, -1.03125),), 1.0, ((0x38, 0x00),), None),
    # silu rounded to the input dtype before the product: gate -0.546875 | up 7. silu = -0.20047875 -> bf16
    # -0.2001953125; times 7 = -1.4013671875 -> bf16 -1.3984375; / fp32(0.0157) = -89.07 -> -89. Unrounded,
    # -0.20047875 * 7 = -1.4033512 -> bf16 -1.40625 -> -89.57 -> -90.
    KnownAnswer("silu_and_mul int8 static: silu rounded to bf16", "silu_and_mul", "int8_static_tensor", "default",
                ((-0.546875, 7.0),), 0.0157, ((-89,),), None),
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
    # FP8 per-token divides by s = fp32(13 / 448) = 0x3cedb6db: 13 / s -> 448 (0x7e); -0.00238037109375 / s is
    # within an fp32 ulp of the e4m3 tie -0.08203125 and the IEEE quotient rounds to -0.078125 (0x9a), where the
    # product with the rounded reciprocal gives -0.0859375 (0x9b); 1 / s = 34.46 -> 36 (0x61).
    KnownAnswer("identity fp8 per-token: a quotient, not a reciprocal's product", "identity", "fp8_dynamic_token",
                "default", ((13.0, -0.00238037109375, 1.0),), None, ((0x7E, 0x9A, 0x61),), (0x3CEDB6DB,)),
    # int8 per-token multiplies by inv = fp32(127 / 9) = 14.111111: 4.5 * inv = 63.5 in fp32, a tie -> 64 (the
    # quotient 4.5 / (9 / 127) gives 63.499996 -> 63); 9 * inv = 126.999996 -> 127; scale 9 / 127 = 0x3d912245.
    # Second row: the scale is fp32(13 / 127) = 0x3dd1a347, where 1 / fp32(127 / 13) would be 0x3dd1a346;
    # inv = 9.769231: 6.5 * inv = 63.5 -> 64, -3.25 * inv = -31.75 -> -32.
    KnownAnswer("identity int8 per-token: the reciprocal's product", "identity", "int8_dynamic_token", "default",
                ((9.0, 4.5, -4.5, 0.0), (13.0, 6.5, -3.25, 0.0)), None, ((127, 64, -64, 0), (127, 64, -32, 0)),
                (0x3D912245, 0x3DD1A347)),
    # a NaN anywhere in a row: scale is the canonical NaN 0x7fc00000; fp8 codes all NaN (0x7f),
    # int8 values all 0. An Inf row: int8 s = Inf, inv = 0 -> q = [NaN -> 0, 0, 0].
    KnownAnswer("identity fp8 per-token, NaN row", "identity", "fp8_dynamic_token", "default",
                ((1.0, NAN, 2.0),), None, ((0x7F, 0x7F, 0x7F),), (0x7FC00000,)),
    KnownAnswer("identity int8 per-token, NaN and Inf rows", "identity", "int8_dynamic_token", "default",
                ((1.0, NAN, 2.0), (INF, 1.0, -1.0)), None, ((0, 0, 0), (0, 0, 0)), (0x7FC00000, 0x7F800000)),
    # e4m3fnuz (exponent bias 8, M8 = 224, NaN 0x80): relu2 y = [0, 0, 0.25, 9, 400, NaN, Inf, 0] at scale 1:
    # 0.25 = 2^-2 -> 0x30, 9 = 1.125 * 2^3 -> 0x59, 400 and Inf clamp to 224 = 1.75 * 2^7 -> 0x7e, NaN -> 0x80.
    KnownAnswer("relu2 fp8 static (e4m3fnuz): clamp to 224, NaN 0x80", "relu2", "fp8_static_tensor", "default",
                ((-1.0, 0.0, 0.5, 3.0, 20.0, NAN, INF, -INF),), 1.0,
                ((0x00, 0x00, 0x30, 0x59, 0x7E, 0x80, 0x7E, 0x00),), None, fp8="e4m3fnuz"),
    # per-token e4m3fnuz: s = 7 / 224 = 2^-5 (0x3d000000): [224, 112, -56, 0] -> [0x7e, 0x76, 0xee, 0x00]; an
    # all-zero row takes the minimum scale 1 / (224 * 512) = 0x37124925; a NaN row the canonical NaN, codes 0x80.
    KnownAnswer("identity fp8 per-token (e4m3fnuz): M8 224, minimum scale, NaN row", "identity",
                "fp8_dynamic_token", "default", ((7.0, 3.5, -1.75, 0.0), (0.0,) * 4, (1.0, NAN, 2.0, 0.0)), None,
                ((0x7E, 0x76, 0xEE, 0x00), (0x00,) * 4, (0x80,) * 4), (0x3D000000, 0x37124925, 0x7FC00000),
                fp8="e4m3fnuz"),
)
