"""Property tests: anything thrown at ``fused_act_quant`` and ``QuantLinear.forward`` either gives
the spec's answer or raises a FusedQuantError (a plain TypeError for non-tensor arguments).

Each example is also classified by a small model of the documented rules (dtype, rank, widths,
keys, scale metadata, token counts): a valid call must succeed and equal the reference bitwise
(producer) or the float64 GEMM bound (linear); an invalid one must raise. No RuntimeError,
IndexError or other torch error may escape.
"""

from __future__ import annotations

import math
import zlib

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from torch import nn

from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.modules import QuantLinear, ReLUSquared, SiluAndMul
from fused_quant.numerics import DEFAULT, HCU, NumericsProfile
from fused_quant.reference import act_quant_ref
from fused_quant.registry import fused_act_quant, platform_fp8_dtype
from fused_quant.validation import ACT_DTYPES, FusedQuantError
from tests.helpers import assert_gemm_close, assert_bits_equal

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    # the backend fixture only sets the env once; nothing to reset between examples
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

FP8 = platform_fp8_dtype()
OTHER_FP8 = torch.float8_e4m3fnuz if FP8 == torch.float8_e4m3fn else torch.float8_e4m3fn
ACT_BY_NAME = {"relu2": "relu2", "silu_and_mul": "silu_and_mul", "identity": "identity"}
ACT_BY_MODULE = {SiluAndMul: "silu_and_mul", ReLUSquared: "relu2", nn.Identity: "identity"}
FNUZ_TOKEN_KEY = K.QuantKey(torch.float8_e4m3fnuz, K.kDynamicTokenScale)  # concrete-dtype spelling
GROUP_KEY = K.QuantKey(K.FP8_DTYPE, K.ScaleDesc(torch.float32, False, K.GroupShape(1, 128)))  # unsupported
SPECIALS = ("zero", "neg_zero", "nan", "inf", "-inf", "denormal", "max", "-max")


def _special(name: str, dtype: torch.dtype) -> float:
    # values are planted into a float32 tensor first: other dtypes get float32's extremes
    fi = torch.finfo(dtype if dtype in ACT_DTYPES else torch.float32)
    return {"zero": 0.0, "neg_zero": -0.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf,
            "denormal": fi.tiny / 4, "max": fi.max, "-max": -fi.max}[name]


@st.composite
def tensors(draw, dtypes, last_dims=(0, 1, 2, 2, 3, 7, 8, 8, 16, 16, 33, 64, 64), specials=SPECIALS):
    """Rank 0..3, leading dims including 0 (M = 0), odd widths, random values of several magnitudes
    with special values planted, sometimes non-contiguous."""
    rank = draw(st.sampled_from((0, 1, 1, 2, 2, 2, 3, 3)))
    lead = tuple(draw(st.lists(st.sampled_from((0, 1, 2, 3, 5)), min_size=max(rank - 1, 0),
                               max_size=max(rank - 1, 0))))
    last = draw(st.sampled_from(last_dims))
    shape = () if rank == 0 else (*lead, last)
    dtype = draw(st.sampled_from(dtypes))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    base = torch.randn(shape, generator=g) * draw(st.sampled_from((1e-3, 1.0, 30.0, 1e4)))
    flat = base.reshape(-1)
    if flat.numel() and specials:
        for _ in range(draw(st.integers(0, 3))):
            flat[draw(st.integers(0, flat.numel() - 1))] = _special(draw(st.sampled_from(specials)), dtype)
    if dtype in (torch.int32, torch.int8):
        x = torch.nan_to_num(base).clamp(-100, 100).round().to(dtype)
    else:
        x = base.to(dtype)
    if x.dim() >= 2 and draw(st.booleans()):
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)  # same shape, column-major strides
    return x


def _sometimes(draw, percent: int) -> bool:
    """True in about ``percent`` % of the draws; False is the simple side hypothesis shrinks towards."""
    return draw(st.integers(0, 99)) >= 100 - percent


VALID_ACTS = ("relu2", "silu_and_mul", "identity", SiluAndMul, ReLUSquared, nn.Identity)
BAD_ACTS = ("gelu", "SiluAndMul", nn.GELU)
SCALE_VALUES = (0.05, 1.7, 1e-30, 3e38, 0.0, -1.0, -0.0, math.inf, math.nan)  # values are not checked per call
BAD_SCALES = (
    torch.ones(2),  # wrong numel
    torch.ones(0),  # no element
    torch.ones(1, dtype=torch.float16), torch.ones(1, dtype=torch.float64), torch.ones(1, dtype=torch.int32),
    torch.ones(1, device="meta"),  # another device
    0.5,  # not a tensor
)


@st.composite
def fused_cases(draw):
    """(act, x, key, scale, numerics): mostly valid, each argument corrupted now and then."""
    act = draw(st.sampled_from(VALID_ACTS if not _sometimes(draw, 10) else BAD_ACTS))
    act = act() if isinstance(act, type) else act
    x = draw(tensors(X_DTYPES if _sometimes(draw, 25) else ACT_DTYPES)) if not _sometimes(draw, 3) else [1.0, 2.0]
    key = draw(st.sampled_from((*K.KEYS.values(), FNUZ_TOKEN_KEY)))
    if _sometimes(draw, 8):
        key = draw(st.sampled_from((GROUP_KEY, "int8_dynamic_token", "int8", None)))
    static = isinstance(key, K.QuantKey) and key != GROUP_KEY and K.is_static(key)
    v = draw(st.sampled_from(SCALE_VALUES))
    one_element = draw(st.sampled_from((torch.tensor([v]), torch.tensor(v), torch.full((1, 1), v))))
    if static:
        scale = one_element if not _sometimes(draw, 25) else draw(st.sampled_from(BAD_SCALES))
    else:
        scale = None if not _sometimes(draw, 15) else draw(st.sampled_from((one_element, *BAD_SCALES)))
    numerics = draw(st.sampled_from((None, "default", "hcu", DEFAULT, HCU) if not _sometimes(draw, 10)
                                    else ("nope", "HCU", 3)))
    return act, x, key, scale, numerics


X_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.int32, torch.float8_e4m3fn, torch.float64)


def _act_name(act) -> str | None:
    if isinstance(act, str):
        return ACT_BY_NAME.get(act)
    return ACT_BY_MODULE.get(type(act))


@SETTINGS
@given(case=fused_cases())
def test_fused_act_quant_equals_the_reference_or_raises_a_library_error(case):
    act, x, key, scale, numerics = case
    name = _act_name(act)
    is_tensor = isinstance(x, torch.Tensor)
    given_key = key
    if isinstance(key, str) and key in K.KEYS:  # key names are accepted wherever a key is taken
        key = K.KEYS[key]
    key_ok = isinstance(key, K.QuantKey) and key != GROUP_KEY
    static = key_ok and K.is_static(key)
    valid = (
        name is not None and is_tensor and x.dtype in ACT_DTYPES and x.dim() >= 1 and x.shape[-1] > 0
        and (name != "silu_and_mul" or x.shape[-1] % 2 == 0)
        and key_ok
        and (isinstance(scale, torch.Tensor) and scale.dtype == torch.float32 and scale.numel() == 1
             and scale.device == x.device if static else scale is None)
        and (numerics is None or isinstance(numerics, NumericsProfile) or numerics in ("default", "hcu"))
    )
    try:
        qa = fused_act_quant(act, x, given_key, scale, numerics=numerics)
    except FusedQuantError as exc:
        event(type(exc).__name__)
        assert not valid, "a valid call was rejected"
    except TypeError:
        # plain TypeError only for a non-tensor argument (x, key or a static scale)
        assert not is_tensor or not isinstance(key, K.QuantKey) or (static and not isinstance(scale, torch.Tensor))
    else:
        assert valid, "an invalid call was accepted"
        event("valid")
        q, s = act_quant_ref(name, x, key, scale, numerics=numerics, fp8_dtype=FP8)
        assert isinstance(qa, QuantizedActivation)
        assert_bits_equal(qa.data, q, "q")
        assert_bits_equal(qa.scale, s, "scale")
        assert qa.quant_key == K.normalize_key(key) and qa.orig_dtype == x.dtype
        assert qa.data.is_contiguous() and qa.scale.is_contiguous()  # what every consumer GEMM needs


# --- QuantLinear.forward ----------------------------------------------------------------------


LAYER_KEYS = list(K.KEYS)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_LAYERS: dict[tuple, QuantLinear] = {}


def _layer(key_name: str, k: int, n: int, bias: bool, out_dtype: torch.dtype) -> QuantLinear:
    spec = (key_name, k, n, bias, out_dtype)
    if spec not in _LAYERS:  # built once per spec: from_float is the slow part of an example
        g = torch.Generator().manual_seed(zlib.crc32(repr(spec).encode()))  # stable across processes
        lin = nn.Linear(k, n, bias=bias).to(out_dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(n, k, generator=g) / math.sqrt(k))
            if n > 1:
                lin.weight[0] = 0  # a zero weight row
            if bias:
                lin.bias.copy_(torch.randn(n, generator=g))
        key = K.KEYS[key_name]
        _LAYERS[spec] = QuantLinear.from_float(lin, key, 0.05 if K.is_static(key) else None, name="prop.layer")
    return _LAYERS[spec]


@st.composite
def quantized_operands(draw, layer: QuantLinear):
    """(xq, xs), mostly right for ``layer``; otherwise wrong dtype, width, rank, token count, device."""
    k = layer.in_features
    xq_dtype = layer.weight.dtype
    if _sometimes(draw, 20):
        xq_dtype = draw(st.sampled_from((torch.int8, FP8, OTHER_FP8, torch.float32, torch.int32)))
    last = k if not _sometimes(draw, 20) else draw(st.sampled_from((2 * k, k + 1, 0)))
    rank = draw(st.sampled_from((0, 1, 1, 2, 2, 2, 3, 3)))
    lead = tuple(draw(st.lists(st.sampled_from((0, 1, 2, 3, 5)), min_size=max(rank - 1, 0),
                               max_size=max(rank - 1, 0))))
    shape = () if rank == 0 else (*lead, last)
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    if xq_dtype in (torch.int8, torch.int32):
        xq = torch.randint(-128, 128, shape, generator=g).to(xq_dtype)
    elif xq_dtype in (FP8, OTHER_FP8):
        xq = torch.randint(0, 256, shape, generator=g).to(torch.uint8).view(xq_dtype)  # every code, NaN included
    else:
        xq = torch.randn(shape, generator=g)
    if xq.dim() >= 2 and _sometimes(draw, 25):
        xq = xq.transpose(-1, -2).contiguous().transpose(-1, -2)  # non-contiguous when both dims > 1
    m = xq.numel() // xq.shape[-1] if xq.dim() and xq.shape[-1] else 0
    tok_lead = tuple(xq.shape[:-1]) if xq.dim() else ()
    right = [(*tok_lead, 1), (m, 1)] if K.is_per_token(layer.input_key) else [(1,), (), (1, 1)]
    wrong = [(1,), (), (*tok_lead,), (m + 1, 1), (2,)]
    xs_shape = draw(st.sampled_from(right if not _sometimes(draw, 25) else wrong))
    xs_vals = torch.rand(xs_shape, generator=g) * 0.1 + 1e-4
    flat = xs_vals.reshape(-1)
    if flat.numel() and draw(st.booleans()):
        flat[draw(st.integers(0, flat.numel() - 1))] = draw(st.sampled_from((0.0, math.nan, math.inf)))
    xs = xs_vals.to(torch.float32 if not _sometimes(draw, 10) else torch.float16)
    if _sometimes(draw, 5):
        xs = xs.to("meta")
    return xq, xs


def _gemm_operands_valid(layer: QuantLinear, xq, xs) -> bool:
    if not (isinstance(xq, torch.Tensor) and xq.dim() >= 1 and xq.shape[-1] == layer.in_features):
        return False
    if xq.dtype != layer.weight.dtype or not xq.is_contiguous():
        return False
    if xs.dtype != torch.float32 or xs.device != xq.device:
        return False
    m = xq.numel() // xq.shape[-1]
    if K.is_per_token(layer.input_key):
        return tuple(xs.shape) in ((*xq.shape[:-1], 1), (m, 1))  # the tokens' layout, or one row each
    return xs.numel() == 1


@SETTINGS
@given(data=st.data(), key_name=st.sampled_from(LAYER_KEYS), k=st.sampled_from((1, 2, 7, 16, 33)),
       n=st.sampled_from((1, 5, 16)), bias=st.booleans(), out_dtype=st.sampled_from(OUT_DTYPES),
       form=st.sampled_from(("plain", "plain", "qa", "tuple", "tuple_placeholder", "none", "list")))
def test_quant_linear_forward_matches_float64_or_raises_a_library_error(data, key_name, k, n, bias, out_dtype,
                                                                         form):
    layer = _layer(key_name, k, n, bias, out_dtype)
    key = layer.input_key
    non_tensor = form in ("none", "list")
    if form == "plain":
        # every special, the dtype's max included: the oracle knows where the fp32 epilogue may or must overflow
        x = data.draw(tensors((*ACT_DTYPES, *ACT_DTYPES, *ACT_DTYPES, torch.int32, torch.float8_e4m3fn),
                              last_dims=(k,) * 8 + (2 * k, k + 1, 0)))
        valid = x.dtype in ACT_DTYPES and x.dim() >= 1 and x.shape[-1] == k
        call = lambda: layer(x)  # noqa: E731
        if valid:
            xq, xs = act_quant_ref("identity", x, key, layer.input_scale, fp8_dtype=FP8)
    elif form == "qa":
        xq, xs = data.draw(quantized_operands(layer))
        qa_key = data.draw(st.sampled_from((key, key, *K.KEYS.values())))
        qa = QuantizedActivation(xq, xs, out_dtype, xq.shape, qa_key)
        valid = qa_key == key and _gemm_operands_valid(layer, xq, xs)
        call = lambda: layer(qa)  # noqa: E731
    elif form.startswith("tuple"):
        xq, xs = data.draw(quantized_operands(layer))
        placeholder = None
        if form == "tuple_placeholder":
            lead = tuple(xq.shape[:-1]) if xq.dim() else ()
            placeholder = data.draw(st.sampled_from((
                torch.full((*lead, 2 * k), math.nan),  # the HCU placeholder, values ignored
                torch.zeros(*lead, 3),
                torch.zeros(*lead, 1, 2 * k),  # one dim too many: token dims differ
                torch.zeros(()),
                [0.0],  # not a tensor
            )))
        non_tensor = isinstance(placeholder, list)
        valid = (_gemm_operands_valid(layer, xq, xs) and (
            placeholder is None or (isinstance(placeholder, torch.Tensor) and placeholder.dim() >= 1
                                    and placeholder.shape[:-1] == xq.shape[:-1])))
        call = lambda: layer(placeholder, x_and_scale_quanted=(xq, xs))  # noqa: E731
    else:
        valid = False
        call = (lambda: layer()) if form == "none" else (lambda: layer([[1.0] * k]))
    try:
        out = call()
    except FusedQuantError as exc:
        event(f"{form}: {type(exc).__name__}")
        assert not valid, "a valid call was rejected"
    except TypeError:
        assert non_tensor, "plain TypeError for tensor arguments"
    else:
        assert valid, "an invalid call was accepted"
        event(f"{form}: valid, M=0" if xq.numel() == 0 else f"{form}: valid")
        assert out.shape == (*xq.shape[:-1], n) and out.dtype == out_dtype and out.device == xq.device
        assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias,
                            exact_acc=not K.is_fp8(key))
