"""``QuantLinear`` on the torch backend: weight quantization, the three input forms, the float64
GEMM bound, names in errors, ``.to()`` and user GEMM providers.

GEMM outputs are checked against float64 (``assert_gemm_close``: the bound of
``assert_gemm_close`` plus equal NaN / Inf positions); the three input forms (plain tensor,
QuantizedActivation, HCU tuple) must give the same bits, since they feed the same operands.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fused_quant

from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation, get_input_quant_key
from fused_quant.gemm import register_gemm_provider, unregister_gemm_provider
from fused_quant.modules import QuantLinear, name_quant_linears
from fused_quant.reference import act_quant_ref, quantize_weight_ref
from fused_quant.registry import fused_act_quant, platform_fp8_dtype
from fused_quant.validation import BackendUnavailableError, FusedQuantError, QuantDTypeError, ShapeMismatchError
from tests.helpers import adversarial_rows, assert_bits_equal, assert_gemm_close

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]

OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# K = 67 and N = 29: odd, so no provider can rely on tile multiples
K_IN, N_OUT = 67, 29
SHAPES = {
    "rank1": (K_IN,),
    "rank2": (13, K_IN),
    "rank3": (2, 7, K_IN),
    "m0": (0, K_IN),  # M = 0: empty [0, N] output, no provider call
    "rank3_m0": (4, 0, K_IN),
}


def _static_scale(key):
    return 0.031 if K.is_static(key) else None


def make_layer(key, out_dtype=torch.bfloat16, bias=True, k=K_IN, n=N_OUT, seed=0,
               name=None) -> tuple[QuantLinear, nn.Linear]:
    torch.manual_seed(seed)
    lin = nn.Linear(k, n, bias=bias).to(out_dtype)
    with torch.no_grad():
        lin.weight[1] = 0  # a zero weight row: ws = 0, that output column is exactly bias
        if bias:
            lin.bias.uniform_(-2, 2)
    return QuantLinear.from_float(lin, key, _static_scale(key), name=name), lin


def make_x(shape, dtype=torch.bfloat16, seed=1) -> torch.Tensor:
    """Random tokens, with every adversarial row mixed in (zero, one huge value, NaN, +-Inf, denormals, +-max,
    -0): where the fp32 epilogue overflows near the dtype max, ``assert_gemm_close`` knows where +-Inf may or
    must come."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    rows = x.view(-1, shape[-1])
    adv = adversarial_rows(shape[-1], dtype, seed=seed)
    n = min(len(rows) // 2, len(adv))
    rows[:n] = adv[:n]
    return x


def expected_operands(layer: QuantLinear, x: torch.Tensor):
    """(xq, xs) as the spec produces them for this layer's key."""
    return act_quant_ref("identity", x, layer.input_key, layer.input_scale, fp8_dtype=platform_fp8_dtype())


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize("bias", (True, False), ids=("bias", "no_bias"))
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=str)
@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_quant_linear_forward(key_name, out_dtype, bias, shape_id):
    key = K.KEYS[key_name]
    layer, lin = make_layer(key, out_dtype, bias)
    # from_float: per-channel weights as the reference quantizes them, bias in the output dtype
    wdtype = platform_fp8_dtype() if K.is_fp8(key) else torch.int8
    wq, ws = quantize_weight_ref(lin.weight.detach(), wdtype)
    assert_bits_equal(layer.weight, wq, "weight")
    assert_bits_equal(layer.weight_scale, ws, "weight_scale")
    assert layer.out_dtype == out_dtype and layer.input_key == key and get_input_quant_key(layer) == key
    assert (layer.in_features, layer.out_features) == (K_IN, N_OUT)
    if bias:
        assert_bits_equal(layer.bias, lin.bias.detach(), "bias")
    else:
        assert layer.bias is None
    if K.is_static(key):
        assert layer.input_scale.dtype == torch.float32 and layer.input_scale.item() == pytest.approx(0.031)
    else:
        assert layer.input_scale is None

    shape = SHAPES[shape_id]
    x = make_x(shape, out_dtype)
    out = layer(x)
    assert out.shape == (*shape[:-1], N_OUT) and out.dtype == out_dtype
    xq, xs = expected_operands(layer, x)
    assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias, exact_acc=not K.is_fp8(key),
                        what=f"{key_name} {shape_id}")

    # the same operands through a QuantizedActivation and through the HCU tuple: the same bits
    qa = fused_act_quant("identity", x, key, layer.input_scale)
    assert_bits_equal(layer(qa), out, "QuantizedActivation input")
    placeholder = torch.full((*shape[:-1], 2 * K_IN), float("nan"), dtype=out_dtype)  # values ignored
    assert_bits_equal(layer(placeholder, x_and_scale_quanted=(qa.data, qa.scale)), out, "HCU tuple")
    assert_bits_equal(layer(None, x_and_scale_quanted=(qa.data, qa.scale)), out, "HCU tuple, no placeholder")


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_input_dtype_differs_from_output_dtype(key_name):
    """A fp32 activation into a bf16 layer: quantized from fp32, output in the layer's dtype."""
    key = K.KEYS[key_name]
    layer, _ = make_layer(key, torch.bfloat16)
    x = make_x((9, K_IN), torch.float32)
    out = layer(x)
    assert out.dtype == torch.bfloat16
    xq, xs = expected_operands(layer, x)
    assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias, exact_acc=not K.is_fp8(key))


def test_placeholder_values_are_ignored():
    """A NaN/Inf-filled placeholder and a random one give the same bits (only its shape is used)."""
    layer, _ = make_layer(K.kInt8DynamicTokenSym)
    qa = fused_act_quant("identity", make_x((5, K_IN)), K.kInt8DynamicTokenSym)
    outs = [layer(p, x_and_scale_quanted=(qa.data, qa.scale))
            for p in (torch.full((5, 2 * K_IN), float("nan")), torch.full((5, 3), float("inf")), torch.randn(5, 1))]
    for o in outs[1:]:
        assert_bits_equal(o, outs[0])
    assert not torch.isnan(outs[0][2:]).any()  # rows 2.. are finite tokens: NaN did not leak in


def test_requires_unquantized_input_layer_still_quantizes_plain_input():
    layer, _ = make_layer(K.kInt8DynamicTokenSym)
    x = make_x((6, K_IN))
    before = layer(x)
    layer.requires_unquantized_input = True
    assert get_input_quant_key(layer) is None
    assert_bits_equal(layer(x), before)


def test_name_quant_linears_names_appear_in_errors():
    model = nn.ModuleDict({
        "layers": nn.ModuleList([
            nn.ModuleDict({"mlp": nn.ModuleDict({"gate_up": make_layer(K.kInt8DynamicTokenSym, k=16, n=64)[0],
                                                 "down": make_layer(K.kInt8DynamicTokenSym, k=32, n=16)[0]})})
            for _ in range(2)]),
        "head": nn.Linear(16, 4),
    })
    down = model["layers"][1]["mlp"]["down"]
    assert down.name == "QuantLinear(in_features=32, out_features=16)"  # default name before naming
    name_quant_linears(model)
    assert down.name == "layers.1.mlp.down"
    assert model["layers"][0]["mlp"]["gate_up"].name == "layers.0.mlp.gate_up"
    with pytest.raises(ShapeMismatchError) as exc:
        down(torch.randn(3, 64))  # the gate_up output fed to down directly
    assert exc.value.layer == "layers.1.mlp.down" and str(exc.value).startswith("layers.1.mlp.down:")
    name_quant_linears(model, prefix="model")
    assert down.name == "model.layers.1.mlp.down"
    # a bare QuantLinear named at the root keeps a useful name with a prefix, and its own without
    solo = make_layer(K.kInt8DynamicTokenSym, name="solo")[0]
    name_quant_linears(solo)
    assert solo.name == "solo"
    name_quant_linears(solo, prefix="lm_head")
    assert solo.name == "lm_head"


def test_extra_repr():
    layer, _ = make_layer(K.kFp8StaticTensorSym, bias=False, name="blk.0.down")
    text = repr(layer)
    for part in ("name='blk.0.down'", f"in_features={K_IN}", f"out_features={N_OUT}", "input_key=fp8_static_tensor",
                 f"weight={platform_fp8_dtype()}", "bias=False"):
        assert part in text, text
    assert "bias=True" in repr(make_layer(K.kInt8DynamicTokenSym)[0])


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_to_moves_buffers(key_name):
    key = K.KEYS[key_name]
    layer, _ = make_layer(key)
    before = {n: b.clone() for n, b in layer.named_buffers()}
    moved = layer.to("meta")
    assert moved is layer
    for name, buf in layer.named_buffers():
        assert buf.device.type == "meta", name
        assert buf.dtype == before[name].dtype and buf.shape == before[name].shape, name
    out = layer(torch.empty(3, 5, K_IN, dtype=torch.bfloat16, device="meta"))
    assert out.device.type == "meta" and out.shape == (3, 5, N_OUT) and out.dtype == torch.bfloat16
    layer.to_empty(device="cpu")
    assert all(b.device.type == "cpu" for b in layer.buffers())


def test_to_dtype_keeps_the_quantized_weights():
    """.to(dtype) changes the output dtype (and the bias's), never the quantized weight or scales."""
    layer, _ = make_layer(K.kInt8StaticTensorSym, torch.bfloat16)
    x = make_x((6, K_IN))
    w, ws, s = layer.weight.clone(), layer.weight_scale.clone(), layer.input_scale.clone()
    layer.to(torch.float16)
    assert layer.out_dtype == torch.float16 and layer.bias.dtype == torch.float16
    assert_bits_equal(layer.weight, w)
    assert_bits_equal(layer.weight_scale, ws)
    assert_bits_equal(layer.input_scale, s)
    out = layer(x)
    assert out.dtype == torch.float16
    xq, xs = expected_operands(layer, x)
    assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias, exact_acc=True)


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("key_name", [name for name, key in K.KEYS.items() if not K.is_fp8(key)])
@pytest.mark.parametrize("bias", (True, False), ids=("bias", "no_bias"))
def test_int8_output_is_the_specs_epilogue_bit_for_bit(key_name, out_dtype, bias):
    """The int8 accumulator is exact, so the spec fixes every bit (docs/NUMERICS.md, consumer GEMMs): the fp32
    ``float(acc) * xs * ws`` in that order, one rounding to the output dtype, then the bias added there. Written
    out here, not through ``gemm.dequant_epilogue``: a scale rounded to the output dtype first, or a second
    rounding between the scales, stays within the float64 bound on most elements."""
    layer, _ = make_layer(K.KEYS[key_name], out_dtype, bias=bias)
    x = make_x((13, K_IN), out_dtype)
    xq, xs = expected_operands(layer, x)
    acc = (xq.double() @ layer.weight.double().T).float()  # exact: |acc| < 2^24 at K = 67
    want = (acc * xs.float().reshape(-1, 1) * layer.weight_scale.float().reshape(1, -1)).to(out_dtype)
    if bias:
        want = want + layer.bias
    assert_bits_equal(layer(x), want, f"{key_name} -> {out_dtype}")


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_user_gemm_provider_receives_validated_2d_operands(key_name):
    key = K.KEYS[key_name]
    layer, _ = make_layer(key)
    kind = "fp8" if K.is_fp8(key) else "int8"
    seen = []

    def provider(xq, xs, w, ws, bias, out_dtype):
        seen.append(dict(xq=xq, xs=xs, w=w, ws=ws, bias=bias, out_dtype=out_dtype))
        return torch.full((xq.shape[0], w.shape[0]), 7.0, dtype=out_dtype)  # recognisable output

    other = "int8" if kind == "fp8" else "fp8"
    x = make_x((2, 7, K_IN))  # rank 3: the provider sees [14, K]
    builtin = layer(x)  # the same problem before registration: a cached choice must not outlive it
    register_gemm_provider("test_user_gemm", provider, kind=kind, backends=("torch",))
    register_gemm_provider("test_other_kind", lambda *a: pytest.fail("provider of the other kind called"),
                           kind=other, backends=("torch",))
    try:
        out = layer(x)
        assert layer(torch.empty(0, K_IN, dtype=torch.bfloat16)).shape == (0, N_OUT)  # M = 0: no call
    finally:
        unregister_gemm_provider("test_user_gemm")
        unregister_gemm_provider("test_other_kind")
    assert len(seen) == 1
    got = seen[0]
    xq, xs = expected_operands(layer, x)
    assert got["xq"].shape == (14, K_IN) and got["xq"].is_contiguous()
    assert_bits_equal(got["xq"], xq.reshape(14, K_IN), "xq")
    assert got["xs"].dtype == torch.float32
    assert got["xs"].shape == ((1, 1) if K.is_static(key) else (14, 1))
    assert_bits_equal(got["xs"], xs.reshape(got["xs"].shape), "xs")
    assert got["w"] is layer.weight and got["w"].shape == (N_OUT, K_IN)
    assert got["ws"].shape == (N_OUT, 1) and got["ws"].dtype == torch.float32
    assert got["bias"] is layer.bias and got["out_dtype"] == torch.bfloat16
    # the provider's output is what the layer returns, reshaped to [*lead, N]
    assert out.shape == (2, 7, N_OUT) and bool((out == 7).all())
    # unregistered: the built-in provider computes the real product again
    assert_bits_equal(layer(x), builtin, "after unregistering")


def test_disabled_gemm_provider_is_skipped(monkeypatch):
    layer, _ = make_layer(K.kInt8DynamicTokenSym)
    x = make_x((4, K_IN))
    calls = []

    def provider(xq, xs, w, ws, bias, out_dtype):
        calls.append(xq.shape)
        return torch.zeros(xq.shape[0], w.shape[0], dtype=out_dtype)

    register_gemm_provider("test_disabled_gemm", provider, kind="int8", backends=("torch",))
    try:
        layer(x)
        assert len(calls) == 1
        monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "other, test_disabled_gemm")
        layer(x)
        assert len(calls) == 2, "the variable is read once per runtime generation, not per call"
        fused_quant.reset()
        # a name that is no provider's (a misspelling) disables nothing: a warning says so where the variable is read
        with pytest.warns(RuntimeWarning, match="FUSED_QUANT_DISABLED_GEMMS names no GEMM provider called 'other'; "
                                                "known providers: .*test_disabled_gemm.*: it disables nothing"):
            out = layer(x)
        assert len(calls) == 2, "a disabled provider was called"
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fused_quant.reset()
        layer(x)
        assert len(calls) == 3, "re-enabled provider not used"
    finally:
        unregister_gemm_provider("test_disabled_gemm")
    xq, xs = expected_operands(layer, x)
    assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias, exact_acc=True)


def test_every_provider_disabled_says_so(monkeypatch):
    """With every provider of its kind disabled the error says that, not that none is registered."""
    layer, _ = make_layer(K.kInt8DynamicTokenSym)
    x = make_x((2, K_IN))
    names = sorted({p.name for chain in fused_quant.gemm._PROVIDERS.values() for p in chain if p.kind == "int8"})
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", ",".join(names))
    fused_quant.reset()
    try:
        with pytest.raises(BackendUnavailableError, match=r"no int8 GEMM provider accepts M=\d+ N=\d+ K=\d+ on cpu "
                           r"\(each one disabled\); disabled by FUSED_QUANT_DISABLED_GEMMS: "):
            layer(x)
    finally:
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fused_quant.reset()


def test_user_gemm_provider_predicate_declines():
    layer, _ = make_layer(K.kInt8DynamicTokenSym)
    problems = []

    def supported(p):
        problems.append(p)
        return False, "only M >= 64"

    register_gemm_provider("test_declining", lambda *a: pytest.fail("declined provider called"), kind="int8",
                           backends=("torch",), supported=supported)
    try:
        x = make_x((5, K_IN))
        out = layer(x)
    finally:
        unregister_gemm_provider("test_declining")
    p = problems[0]
    assert (p.m, p.n, p.k, p.kind, p.out_dtype, p.per_token, p.per_channel, p.has_bias) == (
        5, N_OUT, K_IN, "int8", torch.bfloat16, True, True, True)
    xq, xs = expected_operands(layer, x)
    assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias, exact_acc=True)


def test_quantized_activation_of_rank3_into_the_layer():
    layer, _ = make_layer(K.kFp8DynamicTokenSym, torch.float32)
    x = make_x((3, 4, K_IN), torch.float32)
    qa = fused_act_quant("identity", x, K.kFp8DynamicTokenSym)
    assert isinstance(qa, QuantizedActivation) and qa.scale.shape == (3, 4, 1)
    out = layer(qa)
    assert out.shape == (3, 4, N_OUT)
    assert_gemm_close(out, qa.data, qa.scale, layer.weight, layer.weight_scale, layer.bias, exact_acc=False)


def test_from_float_rejects_non_linear_and_non_key():
    with pytest.raises(TypeError, match="expects torch.nn.Linear, got Conv1d"):
        QuantLinear.from_float(nn.Conv1d(4, 4, 1), K.kInt8DynamicTokenSym)
    with pytest.raises(TypeError, match="input_key must be a fused_quant QuantKey, a key name .* got builtins.int"):
        QuantLinear.from_float(nn.Linear(4, 4), 8)
    assert QuantLinear.from_float(nn.Linear(4, 4), "int8_dynamic_token").input_key is K.kInt8DynamicTokenSym
    # a float64 linear: named as the linear's dtype, which would be the layer's output dtype
    with pytest.raises(QuantDTypeError, match="quantizes a bf16, fp16 or fp32 nn.Linear .* got a torch.float64 one"):
        QuantLinear.from_float(nn.Linear(4, 4).double(), K.kInt8DynamicTokenSym)
    int_linear = nn.Linear(4, 4)
    int_linear.weight = nn.Parameter(torch.ones(4, 4, dtype=torch.int8), requires_grad=False)
    with pytest.raises(QuantDTypeError, match="got a torch.int8 one"):
        QuantLinear.from_float(int_linear, K.kInt8DynamicTokenSym)


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_non_contiguous_plain_input(key_name):
    """A permuted plain input is valid: the layer's own quantized activation must be row-major
    (elementwise torch ops keep a permuted input's strides, which the checked GEMM refuses)."""
    layer, _ = make_layer(K.KEYS[key_name])
    # seq-first activations viewed batch-first: a valid [B=2, T=7, K] tensor with strides (K, 2K, 1)
    x = make_x((7, 2, K_IN)).transpose(0, 1)
    assert_bits_equal(layer(x), layer(x.contiguous()))


def test_double_leaves_a_usable_layer():
    layer, _ = make_layer(K.kInt8DynamicTokenSym, torch.float32, bias=True)
    try:
        with pytest.warns(UserWarning, match="keeps its torch.float32 output"):
            layer.double()  # e.g. model.double() on a model holding QuantLinears
    except FusedQuantError as exc:  # refusing .double() outright, with a library error, is acceptable too
        assert "float64" in str(exc)
    else:
        assert layer.bias.dtype == layer.out_dtype, f"bias {layer.bias.dtype} vs out_dtype {layer.out_dtype}"
        x = make_x((3, K_IN), torch.float32)
        out = layer(x)
        xq, xs = expected_operands(layer, x)
        assert_gemm_close(out, xq, xs, layer.weight, layer.weight_scale, layer.bias, exact_acc=True)


@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_static_tensor"])
def test_static_layer_under_meta_device_init(key_name):
    # deferred initialization (accelerate's init_empty_weights, or torch.device("meta")) builds
    # layers on meta and loads real values later
    try:
        with torch.device("meta"):
            layer = QuantLinear.from_float(nn.Linear(K_IN, N_OUT), K.KEYS[key_name], input_scale=0.5)
    except FusedQuantError as exc:  # a library error saying a meta scale cannot be checked is acceptable
        assert "meta" in str(exc)
    else:
        assert layer.input_scale.device.type == "meta" and layer.weight.device.type == "meta"
