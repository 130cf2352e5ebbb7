"""The spec itself (docs/NUMERICS.md, ``fused_quant/reference.py``) on the CPU.

Every backend is tested bitwise against ``act_quant_ref``, so the reference is checked here
against things that do not share its code: the eager unfused modules (``SiluAndMul``,
``ReLUSquared``) over every bf16 / fp16 bit pattern, and an independent numpy float32
quantizer with its own FP8 round-to-nearest-even encoder built from the format definition.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fused_quant import keys as K
from fused_quant.modules import ReLUSquared, SiluAndMul
from fused_quant.reference import (
    FP8_NAN_CODE,
    act_quant_ref,
    act_ref,
    fp8_min_scale,
    quant_ref,
    quantize_weight_ref,
)
from tests.helpers import adversarial_rows, all_bf16_patterns, assert_bits_equal

ACTS = ("relu2", "silu_and_mul", "identity")
KEY_NAMES = tuple(K.KEYS)
PROFILES = ("default", "hcu")
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
FP8S = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
MODULES = {"relu2": ReLUSquared(), "silu_and_mul": SiluAndMul(), "identity": torch.nn.Identity()}
CANONICAL_NAN_F32 = 0x7FC00000

# D = 74: even, so silu_and_mul accepts it, and its half (37) is odd, so no path can rely on
# widths being multiples of a vector size.
D = 74
SHAPES = {
    "rank1": (D,),
    "rank2": (11, D),
    "rank3": (2, 5, D),
    "rank2_m0": (0, D),  # M = 0: empty output with the right trailing dims, nothing computed
    "rank3_m0": (3, 0, D),  # M = 0 hidden behind a non-zero leading dim
}


# ----------------------------------------------------------------------------------------------
# An independent implementation of the quantizers: numpy float32 (IEEE division, half-to-even
# rint) and an FP8 encoder derived from the e4m3fn / e4m3fnuz bit layouts, not from torch.to().


def _fp8_code_values(fp8: torch.dtype) -> np.ndarray:
    """Value of each non-negative code 0x00..0x7f (NaN where the code is NaN), from the layout."""
    bias = 7 if fp8 == torch.float8_e4m3fn else 8
    vals = []
    for code in range(128):
        e, m = code >> 3, code & 7
        v = m * 2.0 ** (1 - bias - 3) if e == 0 else (1 + m / 8) * 2.0 ** (e - bias)
        vals.append(v)
    vals = np.array(vals)
    if fp8 == torch.float8_e4m3fn:
        vals[0x7F] = np.nan  # S.1111.111 is NaN in e4m3fn; there is no Inf
    return vals


def np_fp8_encode(v: np.ndarray, fp8: torch.dtype) -> np.ndarray:
    """Round float32 values already clamped to [-M8, M8] (or NaN) to FP8 codes, ties to even."""
    mags = _fp8_code_values(fp8)
    finite_codes = np.arange(128)[~np.isnan(mags)]
    table = mags[finite_codes]
    a = np.abs(v.astype(np.float64))
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    hi = np.clip(np.searchsorted(table, a), 0, len(table) - 1)
    lo = np.clip(hi - 1, 0, len(table) - 1)
    dlo, dhi = a - table[lo], table[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (finite_codes[hi] % 2 == 0))
    code = np.where(pick_hi, finite_codes[hi], finite_codes[lo]).astype(np.int64)
    neg = np.signbit(v)
    if fp8 == torch.float8_e4m3fn:
        code = np.where(neg, code | 0x80, code)
    else:  # e4m3fnuz has no -0: 0x80 is its only NaN
        code = np.where(neg & (code != 0), code | 0x80, code)
    code = np.where(nan, FP8_NAN_CODE[fp8], code)
    return code.astype(np.uint8)


def _np_int8(v: np.ndarray) -> np.ndarray:
    r = np.clip(np.rint(v), -128, 127)
    return np.where(np.isnan(r), 0, r).astype(np.int8)


def _canon(s: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(s), np.float32(np.nan), s).astype(np.float32)


def np_quant(y: np.ndarray, key_name: str, scale: float | None, fp8: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(q as int8 / uint8 codes, scale as float32) for y float32 of any shape."""
    f32 = np.float32
    key = K.KEYS[key_name]
    with np.errstate(all="ignore"):
        if K.is_static(key):
            sc = f32(scale)
            if K.is_fp8(key):
                m8 = f32(K.fp8_max(fp8))
                v = np.clip(y * (f32(1) / sc), -m8, m8)  # np.clip keeps NaN
                return np_fp8_encode(v, fp8), np.array([sc], dtype=f32)
            return _np_int8(y / sc), np.array([sc], dtype=f32)
        a = np.max(np.abs(y), axis=-1, keepdims=True)  # NaN propagates
        if K.is_fp8(key):
            m8 = f32(K.fp8_max(fp8))
            s = np.maximum(a / m8, f32(1.0 / (K.fp8_max(fp8) * 512)))  # maximum propagates NaN
            return np_fp8_encode(np.clip(y / s, -m8, m8), fp8), _canon(s)
        s = a / f32(127)
        inv = np.where(a == 0, f32(0), f32(127) / a)
        return _np_int8(y * inv), _canon(s)


def expected_activation(act: str, x: torch.Tensor, profile: str) -> torch.Tensor:
    """What enters the quantizer, built from the eager modules (fp32 tensor)."""
    if act == "silu_and_mul" and profile == "hcu":
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]).float() * x[..., d:].float()  # the product is not rounded to T
    return MODULES[act](x).float()


def assert_matches_numpy(q: torch.Tensor, s: torch.Tensor, y: torch.Tensor, key_name: str,
                         scale: torch.Tensor | None, fp8: torch.dtype) -> None:
    want_q, want_s = np_quant(y.numpy(), key_name, None if scale is None else float(scale), fp8)
    got_q = q.view(torch.uint8) if q.dtype in FP8S else q
    assert_bits_equal(got_q, torch.from_numpy(want_q), "q vs numpy quantizer")
    if not K.is_static(K.KEYS[key_name]):
        assert_bits_equal(s, torch.from_numpy(want_s), "scale vs numpy quantizer")


def make_input(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Random rows, with the adversarial rows of tests.helpers mixed in where rows fit."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    if x.dim() >= 2 and x.numel():
        rows = x.reshape(-1, shape[-1])
        adv = adversarial_rows(shape[-1], dtype, seed=seed)
        n = min(len(rows), len(adv))
        rows[:n] = adv[:n]
    return x


# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("key_name", KEY_NAMES)
@pytest.mark.parametrize("act", ACTS)
def test_act_quant_ref_matrix(act, key_name, profile, dtype, shape_id):
    """Shapes, dtypes and values for every act x key x profile x dtype x rank (M = 0 included)."""
    shape = SHAPES[shape_id]
    key = K.KEYS[key_name]
    x = make_input(shape, dtype)
    scale = torch.tensor([0.0371], dtype=torch.float32) if K.is_static(key) else None
    q, s = act_quant_ref(act, x, key, scale, numerics=profile)

    d_out = shape[-1] // 2 if act == "silu_and_mul" else shape[-1]
    assert q.shape == (*shape[:-1], d_out)
    assert q.dtype == K.storage_dtype(key)
    if K.is_static(key):
        assert s is scale  # the consumer's own tensor, returned as-is
    else:
        assert s.dtype == torch.float32 and s.shape == (*shape[:-1], 1)
    # independent value check: eager modules + numpy quantizer
    y = expected_activation(act, x, profile)
    assert_matches_numpy(q, s, y, key_name, scale, torch.float8_e4m3fn)
    # leading dims are only flattened and restored: rank 3 == the 2-D computation reshaped
    q2, s2 = act_quant_ref(act, x.reshape(-1, shape[-1]), key, scale, numerics=profile)
    assert_bits_equal(q, q2.reshape(q.shape), "q vs the 2-D call")
    assert_bits_equal(s, s2.reshape(s.shape) if not K.is_static(key) else s2, "scale vs the 2-D call")


def _all_patterns(dtype: torch.dtype) -> torch.Tensor:
    p = all_bf16_patterns()
    return p if dtype == torch.bfloat16 else p.view(torch.int16).view(torch.float16)


def _exhaustive_inputs(act: str, dtype: torch.dtype) -> list[torch.Tensor]:
    """Every bit pattern of dtype, laid out two ways: one value per row (each value gets its own
    per-token scale) and 256-wide rows (NaN/Inf rows next to finite ones)."""
    p = _all_patterns(dtype)
    if act == "silu_and_mul":
        # gate = every pattern, up = every pattern in a fixed shuffled order
        up = p[torch.randperm(p.numel(), generator=torch.Generator().manual_seed(1))]
        pairs = torch.stack([p, up], dim=-1)  # [65536, 2]: gate | up, d = 1
        wide = torch.cat([p.reshape(256, 256), up.reshape(256, 256)], dim=-1)  # d = 256
        return [pairs, wide]
    return [p.reshape(-1, 1), p.reshape(256, 256)]


def _assert_same_or_both_nan(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    """Bitwise equal except that NaN payloads of an unquantized activation are unspecified."""
    both_nan = torch.isnan(a) & torch.isnan(b)
    assert_bits_equal(torch.where(both_nan, torch.zeros_like(a), a),
                      torch.where(both_nan, torch.zeros_like(b), b), what)
    assert torch.equal(torch.isnan(a), torch.isnan(b)), f"{what}: NaN positions differ"


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=str)
@pytest.mark.parametrize("act", ("relu2", "silu_and_mul"))
def test_default_profile_is_the_eager_unfused_chain_all_patterns(act, dtype):
    """Fusion never changes a bit: act_quant_ref(default) == quant_ref(Module()(x)) for all 65,536
    patterns, every key; act_ref == the eager module (up to NaN payloads, which quantize canonically)."""
    mod = MODULES[act]
    for x in _exhaustive_inputs(act, dtype):
        _assert_same_or_both_nan(act_ref(act, x), mod(x), f"{act} activation")
        for key_name, key in K.KEYS.items():
            scale = torch.tensor([0.0173], dtype=torch.float32) if K.is_static(key) else None
            q, s = act_quant_ref(act, x, key, scale, numerics="default")
            q_chain, s_chain = quant_ref(mod(x), key, scale)
            assert_bits_equal(q, q_chain, f"{act}->{key_name} q")
            assert_bits_equal(s, s_chain, f"{act}->{key_name} scale")
            assert_matches_numpy(q, s, mod(x).float(), key_name, scale, torch.float8_e4m3fn)


@pytest.mark.parametrize("act", ("relu2", "identity"))
def test_hcu_equals_default_except_silu_and_mul(act):
    """The hcu profile only keeps silu*up in fp32; every other activation is untouched (all patterns)."""
    for x in _exhaustive_inputs(act, torch.bfloat16):
        for key_name, key in K.KEYS.items():
            scale = torch.tensor([0.0173], dtype=torch.float32) if K.is_static(key) else None
            qd, sd = act_quant_ref(act, x, key, scale, numerics="default")
            qh, sh = act_quant_ref(act, x, key, scale, numerics="hcu")
            assert_bits_equal(qh, qd, f"{act}->{key_name} q")
            assert_bits_equal(sh, sd, f"{act}->{key_name} scale")


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=str)
def test_hcu_silu_and_mul_keeps_the_product_in_fp32(dtype):
    """hcu == quant(float(T(silu(g))) * float(u)) over all patterns, and it does differ from default."""
    differs = dict.fromkeys(K.KEYS, False)
    for x in _exhaustive_inputs("silu_and_mul", dtype):
        d = x.shape[-1] // 2
        y = F.silu(x[..., :d]).float() * x[..., d:].float()
        for key_name, key in K.KEYS.items():
            scale = torch.tensor([0.0173], dtype=torch.float32) if K.is_static(key) else None
            qh, sh = act_quant_ref("silu_and_mul", x, key, scale, numerics="hcu")
            qy, sy = quant_ref(y, key, scale)
            assert_bits_equal(qh, qy, f"hcu {key_name} q")
            assert_bits_equal(sh, sy, f"hcu {key_name} scale")
            qd, _ = act_quant_ref("silu_and_mul", x, key, scale, numerics="default")
            differs[key_name] |= bool((qh.view(torch.uint8) != qd.view(torch.uint8)).any())
    # if the profiles never differed, the hcu profile would be dead code
    assert all(differs.values()), f"hcu never differs from default for: {[k for k, v in differs.items() if not v]}"


def test_hcu_equals_default_for_fp32_silu_and_mul():
    """With T = fp32 rounding the product to T is a no-op, so the two profiles coincide."""
    x = make_input((64, 2 * 129), torch.float32, seed=3)
    for key_name, key in K.KEYS.items():
        scale = torch.tensor([0.05], dtype=torch.float32) if K.is_static(key) else None
        qd, sd = act_quant_ref("silu_and_mul", x, key, scale, numerics="default")
        qh, sh = act_quant_ref("silu_and_mul", x, key, scale, numerics="hcu")
        assert_bits_equal(qh, qd, key_name)
        assert_bits_equal(sh, sd, key_name)


def _nan_with_payload(dtype: torch.dtype) -> torch.Tensor:
    """A negative NaN with a non-default payload: the reference must not let either leak out."""
    if dtype == torch.float32:
        return torch.tensor([-0x3FFFFF], dtype=torch.int32).view(torch.float32)  # 0xffc00001
    bits = {torch.bfloat16: -0x3F, torch.float16: -0x1FF}[dtype]  # 0xffc1 / 0xfe01
    return torch.tensor([bits], dtype=torch.int16).view(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_int8_per_token_zero_nan_inf_rows(dtype):
    key = K.kInt8DynamicTokenSym
    x = torch.randn(4, 33).to(dtype)
    x[0] = 0  # all-zero row: s = 0 and q = 0 (no 0/0)
    x[1, 7] = _nan_with_payload(dtype)[0]  # NaN row: canonical NaN scale, q = 0
    x[2, 3] = float("inf")  # Inf row: s = Inf, q = 0 (y * 0, Inf * 0 = NaN -> 0)
    q, s = act_quant_ref("identity", x, key)
    assert s[0].item() == 0.0 and not torch.signbit(s[0]).item()
    assert torch.equal(q[0], torch.zeros(33, dtype=torch.int8))
    assert s[1].view(torch.int32).item() == CANONICAL_NAN_F32
    assert torch.equal(q[1], torch.zeros(33, dtype=torch.int8))
    assert s[2].item() == float("inf")
    assert torch.equal(q[2], torch.zeros(33, dtype=torch.int8))
    # the finite row reaches +-127 at its max
    assert q[3].abs().max().item() == 127


@pytest.mark.parametrize("fp8", FP8S, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fp8_nan_and_zero_rows(fp8, dtype):
    nan_code = FP8_NAN_CODE[fp8]
    x = torch.randn(3, 17).to(dtype)
    x[0] = 0
    x[1, 5] = _nan_with_payload(dtype)[0]
    q, s = act_quant_ref("identity", x, K.kFp8DynamicTokenSym, fp8_dtype=fp8)
    assert q.dtype == fp8
    # zero row: scale clamps to 1 / (M8 * 512), codes are +0
    assert s[0].item() == fp8_min_scale(fp8)
    assert torch.equal(q[0].view(torch.uint8), torch.zeros(17, dtype=torch.uint8))
    # NaN row: canonical NaN scale, every code is the format's NaN code
    assert s[1].view(torch.int32).item() == CANONICAL_NAN_F32
    assert torch.equal(q[1].view(torch.uint8), torch.full((17,), nan_code, dtype=torch.uint8))
    # static: only the NaN element becomes NaN, whatever its sign and payload
    qs, _ = act_quant_ref("identity", x, K.kFp8StaticTensorSym, torch.tensor([0.5]), fp8_dtype=fp8)
    codes = qs.view(torch.uint8)
    assert codes[1, 5].item() == nan_code
    assert int((codes == nan_code).sum()) == 1


@pytest.mark.parametrize("fp8", FP8S, ids=str)
def test_fp8_min_scale_is_one_over_m8_times_512_in_fp32(fp8):
    want = np.float32(1.0 / (K.fp8_max(fp8) * 512.0))
    assert np.float32(fp8_min_scale(fp8)).view(np.int32) == want.view(np.int32)


def test_e4m3fnuz_path():
    """ROCm gfx94x: M8 = 224 (not the format's 240), NaN is 0x80, there is no -0."""
    fnuz = torch.float8_e4m3fnuz
    assert K.fp8_max(fnuz) == 224.0
    one = torch.tensor([1.0])
    x = torch.tensor([[-0.0, -1e-30, 0.0, 1000.0, -1000.0, 224.0, 239.0, float("nan")]])
    q, s = act_quant_ref("identity", x, K.kFp8StaticTensorSym, one, fp8_dtype=fnuz)
    codes = q.view(torch.uint8)[0].tolist()
    c224 = int(np_fp8_encode(np.array([224.0], dtype=np.float32), fnuz)[0])
    assert codes[0] == 0x00 and codes[1] == 0x00 and codes[2] == 0x00  # -0 and tiny negatives -> +0
    assert codes[3] == c224 and codes[4] == c224 | 0x80  # saturate at 224, never NaN
    assert codes[5] == c224 and codes[6] == c224  # 239 would round to 240 > M8: clamped first
    assert codes[7] == 0x80
    assert s is one
    # dynamic per-token: the row max maps exactly onto 224
    y = torch.tensor([[3.0, -12.0, 0.5, 0.0]])
    qd, sd = act_quant_ref("identity", y, K.kFp8DynamicTokenSym, fp8_dtype=fnuz)
    assert sd.item() == np.float32(12.0) / np.float32(224.0)
    assert qd.view(torch.uint8)[0, 1].item() == c224 | 0x80
    # and the whole path agrees with the independent encoder on adversarial rows
    for dtype in DTYPES:
        xx = make_input((16, 40), dtype, seed=5)
        for key_name in ("fp8_static_tensor", "fp8_dynamic_token"):
            scale = torch.tensor([0.021]) if key_name == "fp8_static_tensor" else None
            qq, ss = act_quant_ref("identity", xx, K.KEYS[key_name], scale, fp8_dtype=fnuz)
            assert_matches_numpy(qq, ss, xx.float(), key_name, scale, fnuz)


def test_fnuz_key_dtype_is_the_logical_key():
    """A key spelled with the concrete fnuz dtype quantizes like the logical FP8 key."""
    fnuz_key = K.QuantKey(torch.float8_e4m3fnuz, K.kDynamicTokenScale)
    x = make_input((8, 32), torch.bfloat16)
    a = act_quant_ref("relu2", x, fnuz_key, fp8_dtype=torch.float8_e4m3fnuz)
    b = act_quant_ref("relu2", x, K.kFp8DynamicTokenSym, fp8_dtype=torch.float8_e4m3fnuz)
    assert_bits_equal(a[0], b[0])
    assert_bits_equal(a[1], b[1])


def test_static_scale_edge_values_follow_the_formula():
    """Per call the static scale's value is not checked: 0, negative, Inf and NaN scales still give
    exactly what the formulas say (checked against numpy)."""
    x = make_input((9, 24), torch.bfloat16, seed=7)
    for value in (0.0, -0.25, float("inf"), float("nan"), 1e-45, 3e38):
        scale = torch.tensor([value], dtype=torch.float32)
        for key_name in ("fp8_static_tensor", "int8_static_tensor"):
            for fp8 in FP8S:
                q, s = act_quant_ref("identity", x, K.KEYS[key_name], scale, fp8_dtype=fp8)
                assert_matches_numpy(q, s, x.float(), key_name, scale, fp8)


def test_numpy_fp8_encoder_agrees_with_the_format():
    """Sanity of the independent encoder itself: every finite code decodes and re-encodes to itself."""
    for fp8 in FP8S:
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
        vals = codes.view(fp8).float()
        keep = ~torch.isnan(vals)
        if fp8 == torch.float8_e4m3fnuz:
            keep &= codes != 0x80
        re = np_fp8_encode(vals[keep].numpy(), fp8)
        assert np.array_equal(re, codes[keep].numpy())
        assert np.array_equal(np.abs(vals[keep].numpy()),
                              _fp8_code_values(fp8)[codes[keep].numpy() & 0x7F].astype(np.float32))


# --- weights ----------------------------------------------------------------------------------


def _weight(n: int, k: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    w = (torch.randn(n, k, generator=g) * torch.logspace(-3, 2, n).reshape(-1, 1)).to(dtype)
    w[2] = 0  # zero row: ws = 0 and wq = 0, never 0/0
    w[3, 1] = torch.finfo(dtype).max  # one huge value
    w[4] = torch.finfo(dtype).tiny / 4 if dtype != torch.float32 else torch.finfo(dtype).tiny / 8  # denormals
    return w


def _fp8_half_step(v: np.ndarray, fp8: torch.dtype) -> np.ndarray:
    """Half the spacing of FP8 values around |v| (v in units of the scale)."""
    min_exp = 1 - (7 if fp8 == torch.float8_e4m3fn else 8)
    e = np.floor(np.log2(np.maximum(np.abs(v), 1e-300)))
    return 2.0 ** (np.maximum(e, min_exp) - 3) / 2


@pytest.mark.parametrize("wdtype", (torch.int8, *FP8S), ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_quantize_weight_ref(wdtype, dtype):
    # 37 x 129: odd sizes, so nothing relies on tile multiples
    w = _weight(37, 129, dtype)
    wq, ws = quantize_weight_ref(w, wdtype)
    assert wq.dtype == wdtype and wq.shape == w.shape
    assert ws.dtype == torch.float32 and ws.shape == (37, 1)
    qmax = 127.0 if wdtype == torch.int8 else K.fp8_max(wdtype)
    wf = w.float().numpy()
    want_ws = np.max(np.abs(wf), axis=1, keepdims=True) / np.float32(qmax)
    assert_bits_equal(ws, torch.from_numpy(want_ws.astype(np.float32)), "ws = max|row| / qmax")
    zero = ws[:, 0] == 0
    assert zero[2] and int(zero.sum()) == 1
    assert torch.equal(wq[2].view(torch.uint8) if wdtype != torch.int8 else wq[2],
                       torch.zeros(129, dtype=torch.uint8 if wdtype != torch.int8 else torch.int8))
    # dequantized weights are within half a quantization step of the original
    deq = wq.float().to(torch.float64) * ws.to(torch.float64)
    err = (deq - w.to(torch.float64)).abs().numpy()
    wsn = ws.to(torch.float64).numpy()
    if wdtype == torch.int8:
        bound = wsn * 0.5
        # the row max maps to +-127 exactly
        assert (wq[~zero].abs().amax(dim=1) == 127).all()
    else:
        bound = _fp8_half_step(w.to(torch.float64).numpy() / np.where(wsn == 0, 1, wsn), wdtype) * wsn
        assert (wq[~zero].float().abs().amax(dim=1) == qmax).all()
    # slack for the fp32 division w / ws before rounding (one ulp32 of |w|)
    bound = bound * (1 + 2.0**-20) + np.abs(w.to(torch.float64).numpy()) * 2.0**-23
    worst = np.max(err - bound)
    assert worst <= 0, f"dequantized weight off by more than half a step (excess {worst:.3e})"


def test_quantize_weight_ref_rejects_non_2d():
    with pytest.raises(ValueError, match=r"2-D \[N, K\].*\(4,\)"):
        quantize_weight_ref(torch.randn(4), torch.int8)


def test_quantize_weight_ref_traces_under_fake_tensors():
    """The spec's weight quantization reads no values (no data-dependent shapes): it traces under FakeTensorMode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        wq, ws = quantize_weight_ref(torch.randn(8, 16), torch.int8)
    assert wq.shape == (8, 16) and ws.shape == (8, 1)


@pytest.mark.parametrize("key_name", KEY_NAMES)
@pytest.mark.usefixtures("torch_backend")
def test_the_public_producer_without_numerics_is_the_default_profile(key_name):
    """``numerics`` left out or None means the default profile (the eager chain: silu * up rounded to T), checked
    against the numpy quantizer on bf16 silu_and_mul, where the two profiles differ; the tests that pass the same
    ``numerics`` to the producer and to ``act_quant_ref`` cannot see which profile None resolves to."""
    from fused_quant.numerics import DEFAULT, get_profile
    from fused_quant.registry import fused_act_quant

    assert get_profile(None) is DEFAULT and DEFAULT.name == "default"
    key = K.KEYS[key_name]
    x = make_input((9, 64), torch.bfloat16, seed=5)
    scale = torch.tensor([0.0371]) if K.is_static(key) else None
    want = expected_activation("silu_and_mul", x, "default")
    for qa in (fused_act_quant("silu_and_mul", x, key, scale),
               fused_act_quant("silu_and_mul", x, key, scale, numerics=None)):
        assert_matches_numpy(qa.data, qa.scale, want, key_name, scale, torch.float8_e4m3fn)
