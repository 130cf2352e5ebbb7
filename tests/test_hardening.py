"""Every value is checked where it enters, registration mistakes are loud, and messages name what
was expected and what came: static scales on every way into a QuantLinear, key objects and names,
construction, gradients, backend names, predicate answers, producer outputs, exported errors."""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import types
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import fused_quant as fq
from fused_quant import keys as K
from fused_quant import registry
from fused_quant.contract import QuantizedActivation, as_quantized_activation
from fused_quant.gemm import register_gemm_provider, unregister_gemm_provider
from fused_quant.validation import MIN_STATIC_SCALE
from tests.helpers import assert_bits_equal
from tests.registry_fixtures import TEST_BACKEND, fake_backend  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("torch_backend")

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
BAD_SCALES = [0.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e-40]
STATIC = [K.kInt8StaticTensorSym, K.kFp8StaticTensorSym]


def _layer(key, k=16, n=8, name="blk.0.proj"):
    torch.manual_seed(0)
    return fq.QuantLinear.from_float(nn.Linear(k, n).to(torch.bfloat16), key, 0.05 if K.is_static(key) else None,
                                     name=name)


# --- 1, 2: static scales on every way in -------------------------------------------------------

@pytest.mark.parametrize("key", STATIC, ids=K.key_name)
@pytest.mark.parametrize("value", BAD_SCALES, ids=str)
def test_bad_static_scale_is_refused_on_every_way_in(key, value):
    layer = _layer(key)
    bad = torch.tensor([value])
    bound = f"{MIN_STATIC_SCALE:.8g}"
    with pytest.raises(fq.ScaleError, match=re.escape(bound)):
        layer.input_scale = bad
    with pytest.raises(fq.ScaleError, match=re.escape(bound)):
        layer.set_input_scale(value)
    state = layer.state_dict()
    state["input_scale"] = bad
    with pytest.raises(fq.ScaleError, match="blk.0.proj: input_scale \\(state dict\\)"):
        layer.load_state_dict(state)
    # to_empty(): values nobody set; the first call checks them (here: made bad on purpose)
    empty = _layer(key).to("meta").to_empty(device="cpu")
    with torch.no_grad():
        empty.weight_scale.fill_(1.0)
        empty.input_scale.fill_(value)
    with pytest.raises(fq.ScaleError, match="first use"):
        empty(torch.randn(2, 16).to(torch.bfloat16))


def test_good_scales_still_work_everywhere():
    layer = _layer(K.kInt8StaticTensorSym)
    layer.input_scale = torch.tensor([MIN_STATIC_SCALE])  # the bound itself is fine
    layer.set_input_scale(0.25)
    state = layer.state_dict()
    other = _layer(K.kInt8StaticTensorSym)
    other.load_state_dict(state)
    x = torch.randn(3, 16).to(torch.bfloat16)
    assert torch.equal(other(x), layer(x))
    with pytest.raises(fq.ScaleError, match="computes its scale per token"):
        _layer(K.kInt8DynamicTokenSym).input_scale = torch.tensor([0.1])


# --- 3: the functional form trusts the value (documented) --------------------------------------

def test_functional_form_documents_that_it_trusts_the_scale_value():
    doc = fq.fused_act_quant.__doc__
    assert "value is" in doc and "trusted" in doc and "MIN_STATIC_SCALE" in doc
    assert "trust its value" in README
    # and it indeed does not read it: a zero scale is not an error there (a layer refuses it)
    qa = fq.fused_act_quant("identity", torch.ones(2, 8), K.kInt8StaticTensorSym, torch.tensor([0.0]))
    assert qa.data.dtype == torch.int8


# --- 4: keys -----------------------------------------------------------------------------------

def test_keys_by_object_name_or_value_else_a_clear_error():
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8), "int8_dynamic_token", name="p")
    x = torch.randn(2, 16)
    for carried in (K.kInt8DynamicTokenSym, "int8_dynamic_token"):
        qa = fq.fused_act_quant("identity", x, K.kInt8DynamicTokenSym)
        qa = QuantizedActivation(qa.data, qa.scale, qa.orig_dtype, qa.orig_shape, carried)
        assert type(qa.quant_key) is K.QuantKey and qa.quant_key == K.kInt8DynamicTokenSym  # a name held as the key
        assert layer(qa).shape == (2, 8)
    for bad, error, words in ((None, TypeError, "got builtins.NoneType"), ("int8", fq.UnsupportedError, "'int8'"),
                              (3.0, TypeError, "got builtins.float")):
        with pytest.raises(error, match=words):  # refused where the activation is made
            QuantizedActivation(qa.data, qa.scale, qa.orig_dtype, qa.orig_shape, bad)
        qa.quant_key = bad  # and where it is consumed, if set afterwards
        with pytest.raises(error, match=words):
            layer(qa)
        with pytest.raises(error, match=words):
            as_quantized_activation(qa, K.kInt8DynamicTokenSym)
        with pytest.raises(error, match=words):
            fq.register_producer(fq.SiluAndMul, bad, backend="torch")

    class ForeignKey:  # another library's key class with the same fields (vLLM's QuantKey)
        def __init__(self, key):
            self.dtype, self.scale, self.scale2, self.symmetric = key.dtype, key.scale, None, key.symmetric

    assert K.as_key(ForeignKey(K.kFp8StaticTensorSym)) is K.kFp8StaticTensorSym

    @dataclasses.dataclass(frozen=True)
    class FieldsGroupShape:  # not a tuple: read by its fields, as the error message says
        row: int
        col: int

    foreign = ForeignKey(K.kInt8DynamicTokenSym)
    foreign.scale = types.SimpleNamespace(dtype=torch.float32, static=False, group_shape=FieldsGroupShape(1, -1))
    assert K.as_key(foreign) is K.kInt8DynamicTokenSym
    foreign.scale.group_shape = (1, -1)  # a plain (row, col) pair, as before
    assert K.as_key(foreign) is K.kInt8DynamicTokenSym
    with pytest.raises(TypeError, match="got tests.test_hardening.test_keys_by_object_name_or_value_else_a_clear"):
        K.as_key(object.__new__(type("test_keys_by_object_name_or_value_else_a_clear_error", (), {})))


# --- 5: construction ---------------------------------------------------------------------------

def test_construction_checks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own "Initializing zero-element tensors is a no-op"
        empty = nn.Linear(0, 8)
    with pytest.raises(fq.ShapeMismatchError, match="in_features and out_features must be > 0"):
        fq.QuantLinear.from_float(empty, K.kInt8DynamicTokenSym)
    with pytest.raises(fq.DeviceMismatchError, match="meta device"):
        fq.QuantLinear.from_float(nn.Linear(8, 8), K.kInt8StaticTensorSym, torch.tensor([0.1], device="meta"))
    for not_fp8 in (torch.int8, torch.float16):  # not an FP8 dtype: a wrong type
        with pytest.raises(fq.QuantDTypeError, match=f"fp8_dtype must be an FP8 dtype, one of .* got {not_fp8}"):
            fq.QuantLinear.from_float(nn.Linear(8, 8), K.kFp8DynamicTokenSym, fp8_dtype=not_fp8)
    with pytest.raises(fq.UnsupportedError, match="fp8_dtype torch.float8_e5m2 is an FP8 format no W8A8 key"):
        fq.QuantLinear.from_float(nn.Linear(8, 8), K.kFp8DynamicTokenSym, fp8_dtype=torch.float8_e5m2)
    with pytest.raises(fq.QuantDTypeError, match="fp8_dtype is for FP8 keys"):
        fq.QuantLinear.from_float(nn.Linear(8, 8), K.kInt8DynamicTokenSym, fp8_dtype=torch.float8_e4m3fn)
    w = torch.randint(-127, 128, (8, 16), dtype=torch.int8)
    with pytest.raises(fq.QuantDTypeError, match="needs int8 weights .* got torch.float32"):
        fq.QuantLinear(w.float(), torch.ones(8), K.kInt8DynamicTokenSym, name="q")
    with pytest.raises(fq.QuantDTypeError, match="needs fp8 weights"):
        fq.QuantLinear(w, torch.ones(8), K.kFp8DynamicTokenSym)
    with pytest.raises(fq.ScaleError, match="N=8 scales .* got shape \\(7,\\)"):
        fq.QuantLinear(w, torch.ones(7), K.kInt8DynamicTokenSym)
    with pytest.raises(fq.ShapeMismatchError, match="bias must be \\[N=8\\], got \\(9,\\)"):
        fq.QuantLinear(w, torch.ones(8), K.kInt8DynamicTokenSym, bias=torch.zeros(9))
    with pytest.raises(fq.ShapeMismatchError, match="2-D"):
        fq.QuantLinear(w[0], torch.ones(8), K.kInt8DynamicTokenSym)


# --- 6: inference only -------------------------------------------------------------------------

def test_gradient_is_an_error_never_a_wrong_one():
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(2, 16, requires_grad=True)
    layer(x.detach())  # binds the signature of a plain input
    with pytest.raises(fq.UnsupportedError, match="inference only"):
        layer(x)
    with torch.no_grad():
        assert layer(x).shape == (2, 8)
    with pytest.raises(fq.UnsupportedError, match="inference only"):  # a call under no_grad binds nothing for it
        layer(x)
    with torch.inference_mode():
        assert layer(x.detach()).shape == (2, 8)
        built_here = _layer(K.kInt8StaticTensorSym)  # inference tensors keep no version counter
        assert built_here(torch.randn(2, 16).to(torch.bfloat16)).shape == (2, 8)


@pytest.mark.parametrize("key", [K.kInt8DynamicTokenSym, K.kFp8DynamicTokenSym, K.kInt8StaticTensorSym],
                         ids=K.key_name)
def test_fused_path_refuses_a_gradient_as_the_plain_one_does(key):
    """The producer between two layers is inference only too: an input that requires grad raises there (before,
    the torch backend's per-token scale carried a gradient into the next layer, and a GPU producer's output would
    have cut the graph silently); a quantized activation whose tensors require grad raises at the layer."""
    torch.manual_seed(0)
    up, down = nn.Linear(16, 32).to(torch.bfloat16), _layer(key)
    h = up(torch.randn(3, 16).to(torch.bfloat16))  # requires grad through up's parameters
    for attempt in range(2):  # the second after calls that would have bound its signature
        with pytest.raises(fq.UnsupportedError, match="inference only"):
            fq.maybe_fused_act_quant(fq.SiluAndMul(), h, down)
        with pytest.raises(fq.UnsupportedError, match="inference only"):
            fq.fused_act_quant("silu_and_mul", h, key, down.input_scale)
        with torch.no_grad():
            qa = fq.maybe_fused_act_quant(fq.SiluAndMul(), h, down)
            assert not qa.scale.requires_grad and down(qa).shape == (3, 8)
            assert fq.fused_act_quant("silu_and_mul", h, key, down.input_scale).data.shape == (3, 16)
    with torch.no_grad():
        qa = fq.maybe_fused_act_quant(fq.SiluAndMul(), h.detach(), down)
    down(qa)  # binds the signature of a quantized input
    leaky = QuantizedActivation(data=qa.data, scale=qa.scale.clone().requires_grad_(), orig_dtype=qa.orig_dtype,
                                orig_shape=qa.orig_shape, quant_key=qa.quant_key)
    with pytest.raises(fq.UnsupportedError, match="inference only"):
        down(leaky)
    with pytest.raises(fq.UnsupportedError, match="inference only"):
        down(None, x_and_scale_quanted=(leaky.data, leaky.scale))
    placeholder = torch.randn(3, 32, requires_grad=True)  # the HCU pattern's gate_up output, values ignored
    with torch.no_grad():
        down(placeholder, x_and_scale_quanted=(qa.data, qa.scale))  # binds nothing for it
    with pytest.raises(fq.UnsupportedError, match="inference only"):
        down(placeholder, x_and_scale_quanted=(qa.data, qa.scale))


def test_a_missing_scale_is_a_scale_error_on_every_way_in():
    """None as a static scale: a ScaleError (a FusedQuantError) by attribute, set_input_scale and from_linears; on a
    per-token layer set_input_scale(None) is what the attribute's None is (its scale is None)."""
    static = _layer(K.kInt8StaticTensorSym)
    for set_none in (lambda: setattr(static, "input_scale", None), lambda: static.set_input_scale(None)):
        with pytest.raises(fq.ScaleError, match="blk.0.proj: input_scale .* got NoneType \\(a static key needs"):
            set_none()
    assert float(static.input_scale) == pytest.approx(0.05)  # kept
    with pytest.raises(fq.ScaleError, match="from_linears: input_scale\\[1\\] .* got None \\(a static key"):
        fq.QuantLinear.from_linears([nn.Linear(16, 8), nn.Linear(16, 8)], K.kInt8StaticTensorSym, [0.1, None])
    dynamic = _layer(K.kInt8DynamicTokenSym)
    dynamic.set_input_scale(None)
    assert dynamic.input_scale is None


@pytest.mark.parametrize("key", STATIC, ids=K.key_name)
def test_a_static_scale_that_requires_grad_is_refused(key):
    """A static scale is a fixed value: one that requires grad is refused where it is set, and where it was made
    to require grad in place, the next call with grad enabled raises (before, the torch backend's dequantization
    passed it a gradient); a producer given one raises too."""
    layer, x = _layer(key), torch.randn(2, 16).to(torch.bfloat16)
    with pytest.raises(fq.UnsupportedError, match="blk.0.proj: input_scale \\(when assigned\\) requires grad"):
        layer.input_scale = nn.Parameter(layer.input_scale.clone())
    layer.input_scale = nn.Parameter(layer.input_scale.clone(), requires_grad=False)  # a frozen one is a value
    layer(x)
    layer(x)
    layer.input_scale.requires_grad_()
    with pytest.raises(fq.UnsupportedError, match="inference only"):
        layer(x)
    with torch.no_grad():
        assert layer(x).shape == (2, 8)
    scale = torch.tensor([0.05], requires_grad=True)
    for _ in range(2):
        with pytest.raises(fq.UnsupportedError, match="this static scale requires grad"):
            fq.fused_act_quant("relu2", x, key, scale)
        with torch.no_grad():
            assert fq.fused_act_quant("relu2", x, key, scale).data.shape == (2, 16)


@pytest.mark.parametrize("key", [K.kInt8DynamicTokenSym, K.kFp8DynamicTokenSym], ids=K.key_name)
def test_state_dict_of_another_weight_format_is_refused(key):
    """``load_state_dict`` would cast a float weight into the quantized buffer (int8 truncates it to zeros) and an
    FP8 weight of the other format by value: both raise, naming what the layer holds."""
    layer = _layer(key)
    before = layer.state_dict()
    saved = layer.weight.clone()
    wrong = {**before, "weight": torch.randn(8, 16)}
    with pytest.raises(fq.QuantDTypeError, match=f"weight is torch.float32; this layer holds {layer.weight.dtype}"):
        layer.load_state_dict(wrong)
    if K.is_fp8(key):
        other = {**before, "weight": before["weight"].to(torch.float8_e4m3fnuz)}
        with pytest.raises(fq.QuantDTypeError, match="float8_e4m3fnuz; this layer holds torch.float8_e4m3fn"):
            layer.load_state_dict(other)
    with pytest.raises(fq.QuantDTypeError, match="weight_scale is torch.int32; weight scales are float"):
        layer.load_state_dict({**before, "weight_scale": torch.ones(8, 1, dtype=torch.int32)})
    assert torch.equal(layer.weight.view(torch.uint8), saved.view(torch.uint8))  # nothing was loaded
    twin = _layer(key)
    twin.load_state_dict({**before, "weight_scale": before["weight_scale"].double()})  # a float scale of any width
    x = torch.randn(2, 16).to(torch.bfloat16)
    assert torch.equal(twin(x), layer(x))
    assigned = _layer(key)  # assign=True installs the state dict's own tensors: their dtypes made the layer's
    assigned.load_state_dict({**before, "weight_scale": before["weight_scale"].double(),
                              "bias": before["bias"].float()}, assign=True)
    assert assigned.weight_scale.dtype == torch.float32 and assigned.bias.dtype == torch.bfloat16
    assert torch.equal(assigned(x), layer(x))
    with pytest.raises(fq.QuantDTypeError, match="weight is torch.float32"):
        _layer(key).load_state_dict(wrong, assign=True)


def test_a_plain_input_of_another_k_is_refused_before_its_quantization(monkeypatch):
    """The layer's K check runs before the quantizer, whose own checks would not name the layer."""
    layer = _layer(K.kInt8DynamicTokenSym)

    def quantize(*args, **kwargs):
        raise AssertionError("quantized an input of the wrong K")

    monkeypatch.setattr(registry, "quantize", quantize)
    for bad in (torch.randn(2, 12), torch.randn(2, 0), torch.randn(2, 32)):
        with pytest.raises(fq.ShapeMismatchError, match=f"blk.0.proj: expected K=16 .* received K={bad.shape[-1]}"):
            layer(bad.to(torch.bfloat16))
    with pytest.raises(fq.ShapeMismatchError, match="blk.0.proj: activation must have rank >= 1"):
        layer(torch.tensor(1.0, dtype=torch.bfloat16))


# --- 7, 8, 9: registration -----------------------------------------------------------------------

def test_backend_names_are_checked_and_a_bare_string_refused():
    fn = lambda *a: None  # noqa: E731
    with pytest.raises(TypeError, match="got the string 'torch'; write \\('torch',\\)"):
        register_gemm_provider("x", fn, kind="int8", backends="torch")
    with pytest.raises(fq.BackendUnavailableError, match="unknown backend 'tritn'; valid names: torch"):
        register_gemm_provider("x", fn, kind="int8", backends=("tritn",))
    with pytest.raises(fq.BackendUnavailableError, match="unknown backend 'tritn'"):
        fq.register_producer(fq.SiluAndMul, K.kInt8DynamicTokenSym, backend="tritn")
    for backend in (None, ("torch",), ["torch"]):  # a producer belongs to one backend's table
        with pytest.raises(TypeError, match=f"register_producer: backend must be one backend's name \\(torch, "
                                            f".*got {re.escape(repr(backend))}; a producer is registered once per"):
            fq.register_producer(fq.SiluAndMul, K.kInt8DynamicTokenSym, backend=backend)
        with pytest.raises(TypeError, match="unregister_producer: backend must be one backend's name"):
            fq.unregister_producer(fq.SiluAndMul, K.kInt8DynamicTokenSym, backend=backend)
    with pytest.raises(fq.GemmProviderError, match="'torch_int8_f64' is a registered int8 provider; a fp8 provider "
                                                   "needs its own name"):
        register_gemm_provider("torch_int8_f64", fn, kind="fp8", backends=("torch",))
    assert [p.kind for p in fq.gemm._PROVIDERS["torch"] if p.name == "torch_int8_f64"] == ["int8"]
    with pytest.raises(TypeError, match="supported must be callable"):
        register_gemm_provider("x", fn, kind="int8", backends=("torch",), supported=True)
    assert all(p.name != "x" for chain in fq.gemm._PROVIDERS.values() for p in chain)


@pytest.mark.parametrize("answer", [True, None, (1, ""), (True,), "ok"], ids=repr)
def test_predicate_answers_must_be_ok_reason_pairs(answer, fake_backend):  # noqa: F811
    @fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend=TEST_BACKEND,
                          supported=lambda x, s: answer)
    def prod(x, scale, *, numerics, fp8_dtype):
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="support predicate must return \\(ok: bool, reason: str\\)"):
        fq.fused_act_quant("relu2", torch.randn(2, 8), K.kInt8DynamicTokenSym)
    register_gemm_provider("bad_predicate", lambda *a: None, kind="int8", backends=("torch",),
                           supported=lambda p: answer)
    try:
        layer = _layer(K.kInt8DynamicTokenSym)
        with pytest.raises(TypeError, match="GEMM provider bad_predicate: a support predicate must return"):
            layer(torch.randn(2, 16))
    finally:
        unregister_gemm_provider("bad_predicate")


def test_a_torch_backend_producer_that_declines_is_not_run(monkeypatch):
    monkeypatch.setattr(registry, "_PRODUCERS", {k: dict(v) for k, v in registry._PRODUCERS.items()})

    @fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend="torch",
                          supported=lambda x, s: (False, "only even rows"), replace=True)
    def prod(x, scale, *, numerics, fp8_dtype):
        raise AssertionError("a declining producer ran")

    with pytest.raises(fq.BackendUnavailableError, match="only even rows"):
        fq.fused_act_quant("relu2", torch.randn(3, 8), K.kInt8DynamicTokenSym)


@pytest.mark.parametrize("case", ["float_q", "wrong_shape", "fp16_scale", "bare_tensor", "scale_shape"])
def test_producer_outputs_are_checked(case, fake_backend):  # noqa: F811
    def prod(x, scale, *, numerics, fp8_dtype):
        q = torch.zeros(x.shape, dtype=torch.int8)
        s = torch.ones(*x.shape[:-1], 1)
        return {"float_q": (q.float(), s), "wrong_shape": (q[:, :-1], s), "fp16_scale": (q, s.half()),
                "bare_tensor": q, "scale_shape": (q, s[:1])}[case]

    fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend=TEST_BACKEND)(prod)
    with pytest.raises(fq.ProducerError, match="producer .*prod \\(test_backend: relu2 -> int8_dynamic_token\\)"):
        fq.fused_act_quant("relu2", torch.randn(4, 8), K.kInt8DynamicTokenSym)


# --- 10: exports ---------------------------------------------------------------------------------

def test_every_error_type_is_exported_and_in_readme():
    from fused_quant import errors

    types = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.FusedQuantError)}
    assert types <= set(fq.__all__), types - set(fq.__all__)
    listed = set(re.findall(r"`([A-Za-z]+Error)\(", README))
    assert types - {"FusedQuantError"} == listed, listed ^ (types - {"FusedQuantError"})
    for name in ("fusion_counts", "reset_fusion_counts", "key_from_name"):
        assert name in fq.__all__ and callable(getattr(fq, name))


# --- 11, 12: messages ------------------------------------------------------------------------------

def test_messages_name_the_layer_or_argument_and_what_came():
    layer = _layer(K.kInt8DynamicTokenSym)
    with pytest.raises(fq.QuantDTypeError, match="blk.0.proj: a plain input .* got torch.float64"):
        layer(torch.randn(2, 16).double())
    with pytest.raises(TypeError, match="got the class SiluAndMul; pass SiluAndMul\\(\\)"):
        fq.fused_act_quant(fq.SiluAndMul, torch.randn(2, 8), K.kInt8DynamicTokenSym)
    xq = torch.zeros(2, 16, dtype=torch.int8)
    with pytest.raises(TypeError, match="blk.0.proj: x_and_scale_quanted .* got \\(Tensor, float\\)"):
        layer(x_and_scale_quanted=(xq, 0.1))
    with pytest.raises(TypeError, match="act_fn must be the model's activation module .* got str 'silu_and_mul'"):
        fq.maybe_fused_act_quant("silu_and_mul", torch.randn(2, 32), layer)
    # arguments swapped: the linear given as the activation would have run as one, silently
    swapped = "act_fn is a quantized linear \\(QuantLinear 'blk.0.proj'\\), expected the activation module"
    with pytest.raises(TypeError, match=swapped):
        fq.maybe_fused_act_quant(layer, torch.randn(2, 16), layer)
    with pytest.raises(TypeError, match=swapped + ".*linear_act_quant's \\(linear, x, act_fn, consumer\\)"):
        fq.linear_act_quant(fq.SiluAndMul(), torch.randn(2, 32), layer, layer)
    # linear_act_quant's order given to maybe_fused_act_quant: the activation where the consumer goes
    with pytest.raises(TypeError, match="the consumer is an activation \\(SiluAndMul\\), act_fn a QuantLinear"):
        fq.maybe_fused_act_quant(layer, torch.randn(2, 16), fq.SiluAndMul())
    assert fq.maybe_fused_act_quant(fq.SiluAndMul(), torch.randn(2, 16), None).shape == (2, 8)  # no consumer: runs


def test_double_warns_that_the_output_stays():
    layer = _layer(K.kInt8DynamicTokenSym)
    with pytest.warns(UserWarning, match="keeps its torch.bfloat16 output"):
        layer.double()
    assert layer.out_dtype == torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer.half()  # a dtype it outputs: no warning
    assert layer.out_dtype == torch.float16



# --- 13: the layer's tensors on every way in ------------------------------------------------------

KEYS = [K.kInt8DynamicTokenSym, K.kFp8StaticTensorSym]


def _frozen(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t.clone(), requires_grad=False)  # how vLLM-style loaders hand a layer its tensors


@pytest.mark.parametrize("key,name", [(key, name) for key in KEYS for name in ("weight", "weight_scale", "bias")]
                         + [(K.kFp8StaticTensorSym, "input_scale")], ids=lambda v: v if isinstance(v, str) else K.key_name(v))
def test_a_frozen_parameter_set_or_loaded_stays_a_buffer(key, name):
    """An nn.Parameter put where the layer holds a buffer (attribute, load_state_dict(assign=True)) is kept as the
    buffer's tensor: bound calls find it, and the output is the original layer's, bit for bit."""
    layer, x = _layer(key), torch.randn(3, 16).to(torch.bfloat16)
    want = layer(x)
    set_, loaded = _layer(key), _layer(key)
    setattr(set_, name, _frozen(getattr(set_, name)))
    state = loaded.state_dict()
    loaded.load_state_dict({**state, name: _frozen(state[name])}, assign=True)
    for other in (set_, loaded):
        assert name in other._buffers and not other._parameters, list(other._parameters)
        for _ in range(3):  # the checked call, then bound ones
            assert torch.equal(other(x), want)


@pytest.mark.parametrize("key,name", [(key, name) for key in KEYS for name in ("weight_scale", "bias")]
                         + [(K.kFp8StaticTensorSym, "input_scale")], ids=lambda v: v if isinstance(v, str) else K.key_name(v))
def test_a_tensor_that_requires_grad_is_refused_by_load_state_dict_assign_by_name(key, name):
    """load_state_dict(assign=True) would make a state dict's tensor the layer's own: one that requires grad is the
    package's UnsupportedError naming the key (raised inside torch's setattr it came as torch's RuntimeError); the
    layer is left as it was, and a copying load takes its value."""
    layer, x = _layer(key), torch.randn(3, 16).to(torch.bfloat16)
    want, state = layer(x), layer.state_dict()
    trainable = nn.Parameter(state[name].clone().float())
    with pytest.raises(fq.UnsupportedError, match=f"blk.0.proj: the state dict's {name} requires grad, and "
                                                  r"load_state_dict\(assign=True\)"):
        layer.load_state_dict({**state, name: trainable}, assign=True)
    assert torch.equal(layer(x), want) and not getattr(layer, name).requires_grad
    layer.load_state_dict({**state, name: trainable})  # a copy of its value
    assert torch.equal(layer(x), want) and not getattr(layer, name).requires_grad
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:  # swap mode detaches what it assigns: loaded, not refused
        swapped = {**state, name: nn.Parameter(state[name].clone().float())}
        if K.is_static(key):  # but torch cannot swap the weakly referenced static scale: said by name
            with pytest.raises(fq.UnsupportedError, match="blk.0.proj: load_state_dict under torch.__future__'s swap "
                                                          "mode .* cannot swap a static input_scale"):
                layer.load_state_dict(swapped, assign=True)
        else:
            layer.load_state_dict(swapped, assign=True)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)
    assert torch.equal(layer(x), want) and not getattr(layer, name).requires_grad


@pytest.mark.parametrize("assign", [True, False], ids=["assign", "copy"])
@pytest.mark.parametrize("key", [k for k in KEYS if not K.is_static(k)], ids=K.key_name)
def test_swap_mode_loads_again_after_the_layer_has_run(key, assign):
    """Under torch.__future__'s swap mode, a layer loaded, run (its call bound to views of its tensors) and loaded
    again: torch refused to swap a tensor a bound call held a view of, part-way through the load, and the layer kept
    the old weight scale beside the new weight. It loads, and computes what a layer built from the new state does."""
    def made(gain):
        torch.manual_seed(0)
        lin = nn.Linear(32, 16).to(torch.bfloat16)
        lin.weight.data *= gain
        return fq.QuantLinear.from_float(lin, key, name="L")

    layer, x = made(1.0), torch.randn(4, 32).to(torch.bfloat16)
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        layer.load_state_dict(made(1.0).state_dict(), assign=assign)
        layer(x)
        new = made(10.0)
        layer.load_state_dict(new.state_dict(), assign=assign)
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)
    assert torch.equal(layer(x), new(x))


@pytest.mark.parametrize("moved", ["weight", "weight_scale", "bias", "input_scale"])
def test_assign_of_tensors_on_two_devices_is_refused_before_any_is_installed(moved):
    """``load_state_dict(assign=True)`` whose tensors would leave the layer on two devices (one moved to meta) is
    refused naming each tensor's device, before torch installs any: the layer keeps every tensor it had. (A meta
    weight was installed, then the input scale refused with a message that named it.)"""
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8), K.kInt8StaticTensorSym, 0.05, name="L")
    before = {n: t for n, t in layer.state_dict().items()}
    sd = dict(before)
    sd[moved] = sd[moved].to("meta")
    with pytest.raises(fq.DeviceMismatchError, match=f"L: load_state_dict\\(assign=True\\) would leave the layer's "
                                                     f"tensors on several devices: .*{moved} on meta"):
        layer.load_state_dict(sd, assign=True)
    assert all(t.device.type == "cpu" and torch.equal(t, before[n]) for n, t in layer.state_dict().items())
    sd = {n: t.to("meta") for n, t in before.items()}  # all on one device: installed
    layer.load_state_dict(sd, assign=True)
    assert layer.weight.device.type == "meta"


def test_assign_leaves_a_tensor_the_layer_does_not_hold_to_torch():
    """A bias-less layer given a bias that requires grad: torch's unexpected key, not a requires-grad refusal."""
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8, bias=False), K.kInt8DynamicTokenSym, name="p")
    state = {**layer.state_dict(), "bias": nn.Parameter(torch.zeros(8))}
    assert layer.load_state_dict(state, strict=False, assign=True).unexpected_keys == ["bias"]
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "bias"'):
        layer.load_state_dict(state, assign=True)


def test_the_constructor_holds_a_parameter_weight_detached():
    """Built from values, as the scales and bias are: a trainable FP8 weight is held detached (the same storage), so
    that a forward with grad enabled runs."""
    w = nn.Parameter(torch.randn(8, 16).to(torch.float8_e4m3fn))
    layer = fq.QuantLinear(w, torch.full((8,), 0.01), K.kFp8DynamicTokenSym)
    assert not layer.weight.requires_grad and type(layer.weight) is torch.Tensor
    assert layer.weight.data_ptr() == w.data_ptr()
    assert layer(torch.randn(2, 16)).shape == (2, 8)


def _refused_on_every_way_in(layer, bad, message: str) -> None:
    """``bad`` as a weight scale: refused with ``message`` (a pattern) when a layer is built with it, when it is set on
    ``layer`` and when it is loaded into ``layer`` (copied and assigned)."""
    with pytest.raises(fq.ScaleError, match="QuantLinear: weight_scale: " + message):
        fq.QuantLinear(layer.weight, bad, K.kInt8DynamicTokenSym)
    with pytest.raises(fq.ScaleError, match="blk.0.proj: weight_scale: " + message):
        layer.weight_scale = bad
    for assign in (False, True):
        with pytest.raises(fq.ScaleError, match="the state dict's weight_scale: " + message):
            layer.load_state_dict({**layer.state_dict(), "weight_scale": bad}, assign=assign)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0], ids=str)
def test_a_bad_weight_scale_is_refused_on_every_way_in(value):
    layer = _layer(K.kInt8DynamicTokenSym)
    bad = layer.weight_scale.clone()
    bad[5] = value
    message = f"weight scales must be finite and >= 0 in float32, got {value!r} for output channel 5 \\(1 such values\\)"
    _refused_on_every_way_in(layer, bad, message)
    w = nn.Linear(16, 8).to(torch.bfloat16)
    with torch.no_grad():
        w.weight[5, 3] = value if value != -1.0 else float("inf")  # a weight that gives no scale
    shown = "nan" if value != value else "inf"
    with pytest.raises(fq.ScaleError, match=f"from_float: the float weight has a non-finite value in output channel 5 "
                                            f"\\({shown} at \\[5, 3\\]; 1 of 8 channels\\)"):
        fq.QuantLinear.from_float(w, K.kInt8DynamicTokenSym)
    x = torch.randn(2, 16).to(torch.bfloat16)
    assert torch.isfinite(layer(x)).all()  # each refusal left the layer as it was


@pytest.mark.parametrize("value,held", [(1e300, "inf"), (1e-300, "0.0"), (-1e-300, "-0.0")], ids=str)
def test_a_wider_weight_scale_is_checked_as_the_float32_the_layer_holds(value, held):
    """A float64 weight scale beyond float32's range (inf once held), or not 0 and below it (0: the channel's output
    silently zero), is refused on every way in, naming both values; a float64 0 is a zero row, as in float32."""
    layer = _layer(K.kInt8DynamicTokenSym)
    bad = layer.weight_scale.double()
    bad[5] = value
    message = re.escape(f"weight scales must be finite and >= 0 in float32, got {value!r} ({held} as float32) for "
                        "output channel 5 (1 such values)")
    _refused_on_every_way_in(layer, bad, message)
    bad[5] = 0.0
    assert torch.equal(fq.QuantLinear(layer.weight, bad, K.kInt8DynamicTokenSym).weight_scale, bad.float())


def test_from_float_of_a_lazy_linear_before_its_first_call():
    with pytest.raises(fq.UnsupportedError, match="LazyLinear's weight is not initialized yet .* call it once, then "
                                                  "from_float"):
        fq.QuantLinear.from_float(nn.LazyLinear(8), K.kInt8DynamicTokenSym)
    lazy = nn.LazyLinear(8)
    lazy(torch.randn(2, 16))  # now an nn.Linear(16, 8)
    assert fq.QuantLinear.from_float(lazy, K.kInt8DynamicTokenSym).weight.shape == (8, 16)


def test_a_zero_weight_scale_is_a_zero_row():
    layer = _layer(K.kInt8DynamicTokenSym)
    ws = layer.weight_scale.clone()
    ws[2] = 0.0
    layer.weight_scale = ws
    out = layer(torch.randn(2, 16).to(torch.bfloat16))
    assert torch.equal(out[:, 2], layer.bias[2].expand(2))


def test_tensors_that_require_grad_are_refused_or_detached():
    layer = _layer(K.kInt8DynamicTokenSym)
    for name in ("weight_scale", "bias"):
        with pytest.raises(fq.UnsupportedError, match=f"blk.0.proj: {name} requires grad; QuantLinear is inference"):
            setattr(layer, name, getattr(layer, name).float().requires_grad_())
    ws = layer.weight_scale.clone().requires_grad_()  # the constructor detaches what it is given, as it does a bias
    built = fq.QuantLinear(layer.weight, ws, K.kInt8DynamicTokenSym, bias=layer.bias)
    out = built(torch.randn(2, 16).to(torch.bfloat16))
    assert not built.weight_scale.requires_grad and out.grad_fn is None


def test_input_key_is_fixed_and_out_dtype_checked():
    layer = _layer(K.kInt8DynamicTokenSym)
    with pytest.raises(fq.UnsupportedError, match="blk.0.proj: input_key is fixed when a QuantLinear is built"):
        layer.input_key = K.kInt8StaticTensorSym
    with pytest.raises(fq.QuantDTypeError, match="blk.0.proj: output dtype must be torch.bfloat16, torch.float16 or "
                                                 "torch.float32, got torch.int64"):
        layer.out_dtype = torch.int64
    with pytest.raises(TypeError, match=r"blk.0.proj: output dtype must be a torch.dtype \(torch.bfloat16, "
                                        r"torch.float16 or torch.float32\), got str 'float16'"):
        layer.out_dtype = "float16"  # was "must be one of bf16, fp16, fp32; got float16"
    assert layer.input_key is K.kInt8DynamicTokenSym and layer.out_dtype == torch.bfloat16


def test_to_an_fp8_dtype_keeps_the_bias_exact():
    layer = _layer(K.kInt8DynamicTokenSym)
    bias = layer.bias.clone()
    with pytest.warns(UserWarning, match="keeps its torch.bfloat16 output"):
        layer.to(torch.float8_e4m3fn)
    assert layer.bias.dtype == torch.bfloat16 and torch.equal(layer.bias, bias)


@pytest.mark.parametrize("scales,error,message", [
    ([0.1, float("nan")], fq.ScaleError, "input_scale\\[1\\] must be finite"),
    ([float("nan"), 0.1], fq.ScaleError, "input_scale\\[0\\] must be finite"),
    ([-5.0, 0.1], fq.ScaleError, "input_scale\\[0\\] must be finite and >="),
    ([0.0, 0.1], fq.ScaleError, "input_scale\\[0\\] must be finite and >="),
    ([torch.tensor([1]), 0.1], fq.QuantDTypeError, "input_scale\\[0\\] must be float32, got torch.int64"),
    (["0.3", 0.1], TypeError, "input_scale\\[0\\] must be a number or a one-element float32 tensor, got str '0.3'"),
    ([True, 0.1], TypeError, "input_scale\\[0\\] must be a number .* got bool True"),
    ([torch.tensor([0.1, 0.2]), 0.1], fq.ScaleError, "input_scale\\[0\\] must have exactly 1 element, got 2"),
], ids=str)
def test_from_linears_checks_each_scale(scales, error, message):
    linears = [nn.Linear(16, 8).to(torch.bfloat16) for _ in range(2)]
    with pytest.raises(error, match="gate_up: " + message):
        fq.QuantLinear.from_linears(linears, K.kInt8StaticTensorSym, scales, name="gate_up")
    merged = fq.QuantLinear.from_linears(linears, K.kInt8StaticTensorSym, [0.2, torch.tensor([0.3])])
    assert merged.input_scale.item() == pytest.approx(0.3)  # the max of the checked scales


def test_from_linears_takes_a_tensor_of_one_scale_per_linear():
    """vLLM holds a merged layer's input scales as one tensor (one per part): read as the list of them, each
    checked; a tensor of another count is refused naming it."""
    linears = [nn.Linear(16, 8).to(torch.bfloat16) for _ in range(3)]
    merged = fq.QuantLinear.from_linears(linears, K.kInt8StaticTensorSym, torch.tensor([0.1, 0.4, 0.2]))
    assert merged.input_scale.item() == pytest.approx(0.4)
    with pytest.raises(fq.ScaleError, match="qkv: input_scale\\[2\\] must be finite"):
        fq.QuantLinear.from_linears(linears, K.kInt8StaticTensorSym, torch.tensor([0.1, 0.4, float("nan")]),
                                    name="qkv")
    with pytest.raises(fq.ScaleError, match="qkv: input_scale must have exactly 1 element, got 2"):
        fq.QuantLinear.from_linears(linears, K.kInt8StaticTensorSym, torch.tensor([0.1, 0.4]), name="qkv")
    one = fq.QuantLinear.from_linears(linears, K.kInt8StaticTensorSym, torch.tensor([0.3]))
    assert one.input_scale.item() == pytest.approx(0.3)


def test_a_static_scale_is_a_number_or_a_tensor_never_a_string():
    layer = _layer(K.kInt8StaticTensorSym)
    for bad in ("0.3", True):
        with pytest.raises(TypeError, match=f"blk.0.proj: input_scale must be a number or a one-element float32 "
                                            f"tensor, got {type(bad).__name__}"):
            layer.set_input_scale(bad)
    np = pytest.importorskip("numpy")
    layer.set_input_scale(np.float32(0.25))  # numpy's scalars are numbers
    assert layer.input_scale.item() == 0.25


def test_per_token_scales_have_the_tokens_layout():
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(2, 3, 16).to(torch.bfloat16)
    qa = layer._activation(x, None)
    want = layer(qa)
    for shape in ((2, 3, 1), (6, 1)):  # the tokens' own layout, or one row each
        xs = qa.scale.reshape(shape)
        assert torch.equal(fq.quant_gemm(QuantizedActivation(qa.data, xs, torch.bfloat16, x.shape, qa.quant_key),
                                         layer.weight, layer.weight_scale, layer.bias, out_dtype=torch.bfloat16), want)
    for shape in ((3, 2, 1), (1, 6, 1), (6,)):  # six values, in another layout
        with pytest.raises(fq.ShapeMismatchError, match=f"\\[\\*tokens, 1\\] with 6 rows \\(\\[2, 3, 1\\] or \\[6, 1\\] "
                                                       f"for activation \\(2, 3, 16\\)\\), got shape {re.escape(str(shape))}"):
            fq.quant_gemm(QuantizedActivation(qa.data, qa.scale.reshape(shape), torch.bfloat16, x.shape, qa.quant_key),
                          layer.weight, layer.weight_scale, layer.bias, out_dtype=torch.bfloat16)


@pytest.mark.parametrize("which", ["activation scale", "weight scale", "bias"])
def test_the_functional_gemm_refuses_tensors_that_require_grad(which):
    layer = _layer(K.kInt8DynamicTokenSym)
    qa = layer._activation(torch.randn(2, 16).to(torch.bfloat16), None)
    xs, ws, bias = qa.scale.clone(), layer.weight_scale.clone(), layer.bias.clone()
    {"activation scale": xs, "weight scale": ws, "bias": bias}[which].requires_grad_()
    qa = QuantizedActivation(qa.data, xs, torch.bfloat16, qa.orig_shape, qa.quant_key)
    with pytest.raises(fq.UnsupportedError, match=f"blk: the quantized GEMM is inference only; its {which} require"):
        fq.quant_gemm(qa, layer.weight, ws, bias, out_dtype=torch.bfloat16, layer="blk")
    with torch.no_grad():
        out, want = fq.quant_gemm(qa, layer.weight, ws, bias, out_dtype=torch.bfloat16), layer(qa)
    assert not out.requires_grad and torch.equal(out, want)


def test_a_weight_scale_set_is_held_as_float32_rows_and_writes_to_it_are_seen():
    layer, x = _layer(K.kInt8DynamicTokenSym), torch.randn(2, 16).to(torch.bfloat16)
    ws = layer.weight_scale.clone()
    layer.weight_scale = ws.reshape(-1).double()  # [N] float64: held as the constructor holds it
    assert layer.weight_scale.shape == (8, 1) and layer.weight_scale.dtype == torch.float32
    want = layer(x)
    layer(x)  # bound
    with torch.no_grad():
        layer.weight_scale.mul_(2)  # in place, on the tensor the layer holds: the bound call reads it
    assert torch.allclose(layer(x) - layer.bias, 2 * (want - layer.bias), rtol=1e-2, atol=1e-2)
    flat = ws.reshape(-1).contiguous()
    layer.weight_scale = flat  # float32 of another layout: a view of the tensor given
    assert layer.weight_scale.data_ptr() == flat.data_ptr()


def test_key_names_are_strings():
    with pytest.raises(TypeError, match="a quant key name is a string \\(one of .*got list \\['x'\\]"):
        K.key_from_name(["x"])


def test_a_weight_is_contiguous_on_every_way_in():
    layer = _layer(K.kInt8DynamicTokenSym)
    strided = torch.zeros(16, 8, dtype=torch.int8).t()  # [8, 16] with K not contiguous
    with pytest.raises(fq.LayoutError, match="QuantLinear: weight must be contiguous \\[N, K\\] \\(K contiguous\\), "
                                             "got strides \\(1, 8\\)"):
        fq.QuantLinear(strided, layer.weight_scale, K.kInt8DynamicTokenSym)
    with pytest.raises(fq.LayoutError, match=r"blk.0.proj: the state dict's weight \(assign=True\): weight must be "
                                             "contiguous"):  # was the refusal inside torch's RuntimeError
        layer.load_state_dict({**layer.state_dict(), "weight": strided}, assign=True)
    with pytest.raises(fq.LayoutError, match="blk.0.proj: weight must be contiguous"):
        layer.weight = strided
    layer.load_state_dict({**layer.state_dict(), "weight": strided})  # copied in: the layer's layout stays
    assert layer.weight.is_contiguous() and torch.equal(layer.weight, strided)


def test_from_linears_on_meta_takes_per_linear_scales_on_meta():
    """Linears built on meta (deferred initialization) with one meta scale per linear give a meta layer, as one meta
    scale does (the values come with the state dict); it failed inside torch taking the largest of no values. Meta
    scales mixed with real ones are refused by name."""
    a, b = nn.Linear(16, 8, device="meta"), nn.Linear(16, 8, device="meta")
    metas = [torch.tensor([0.1], device="meta"), torch.tensor([0.2], device="meta")]
    merged = fq.QuantLinear.from_linears([a, b], K.kInt8StaticTensorSym, metas)
    assert merged.input_scale.device.type == "meta" and merged.weight.device.type == "meta"
    assert merged.weight.shape == (16, 16)
    with pytest.raises(fq.DeviceMismatchError, match=r"gu: the input scales are on meta \(no value to take the "
                                                     r"largest of\) and on other devices, got \['meta', 'cpu'\]"):
        fq.QuantLinear.from_linears([a, b], K.kInt8StaticTensorSym, [metas[0], torch.tensor([0.2])], name="gu")


def test_from_linears_refuses_linears_of_other_dtypes_or_devices():
    bf16, fp16 = nn.Linear(16, 8).to(torch.bfloat16), nn.Linear(16, 8).to(torch.float16)
    with pytest.raises(fq.QuantDTypeError, match="gate_up: the linears must share a dtype and a device, got "
                                                 "\\[\\('torch.bfloat16', 'cpu'\\), \\('torch.float16', 'cpu'\\)\\]"):
        fq.QuantLinear.from_linears([bf16, fp16], K.kInt8DynamicTokenSym, name="gate_up")
    meta = nn.Linear(16, 8, device="meta").to(torch.bfloat16)
    with pytest.raises(fq.DeviceMismatchError, match="the linears must share a dtype and a device"):
        fq.QuantLinear.from_linears([bf16, meta], K.kInt8DynamicTokenSym)


def test_a_layer_of_another_fp8_format_names_it_on_a_plain_input():
    other = torch.float8_e4m3fnuz  # this CPU node quantizes to e4m3fn
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8).to(torch.bfloat16), K.kFp8DynamicTokenSym, fp8_dtype=other,
                                      name="blk")
    with pytest.raises(fq.QuantDTypeError, match="blk: this node quantizes activations to torch.float8_e4m3fn, the "
                                                 "layer's weights are torch.float8_e4m3fnuz"):
        layer(torch.randn(2, 16).to(torch.bfloat16))


@pytest.mark.parametrize("name,key", [("weight_scale", K.kInt8DynamicTokenSym), ("bias", K.kInt8DynamicTokenSym),
                                      ("weight", K.kFp8DynamicTokenSym)])  # int8 tensors cannot require grad
def test_a_tensor_made_to_require_grad_in_place_stops_a_bound_call(name, key):
    layer, x = _layer(key), torch.randn(2, 16).to(torch.bfloat16)
    want = layer(x)
    layer(x)  # bound
    getattr(layer, name).requires_grad_()  # in place: no setattr sees it
    with pytest.raises(fq.UnsupportedError, match="blk.0.proj: QuantLinear is inference only"):
        layer(x)
    with torch.no_grad():
        assert torch.equal(layer(x), want)


def test_from_float_takes_a_weight_of_any_layout_and_a_numpy_scale():
    np = pytest.importorskip("numpy")
    torch.manual_seed(0)
    lin = nn.Linear(16, 8).to(torch.bfloat16)
    view = nn.Linear(16, 8).to(torch.bfloat16)
    view.weight = nn.Parameter(lin.weight.detach().t().contiguous().t())  # the same values, K not contiguous
    view.bias = lin.bias
    assert not view.weight.is_contiguous()
    x = torch.randn(3, 16).to(torch.bfloat16)
    a = fq.QuantLinear.from_float(view, K.kInt8StaticTensorSym, np.array(0.05, dtype=np.float32))  # a 0-d array
    b = fq.QuantLinear.from_float(lin, K.kInt8StaticTensorSym, 0.05)
    assert a.weight.is_contiguous() and torch.equal(a.weight, b.weight)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))


def test_out_dtype_set_takes_the_bias_along_as_to_does():
    layer, x = _layer(K.kInt8DynamicTokenSym), torch.randn(2, 16).to(torch.bfloat16)
    want = layer.to(torch.float16)(x)
    layer.out_dtype = torch.bfloat16
    assert layer.bias.dtype == torch.bfloat16 and layer(x).dtype == torch.bfloat16
    layer.out_dtype = torch.float16
    assert layer.bias.dtype == torch.float16 and torch.equal(layer(x), want)


def test_a_bias_or_weight_set_is_checked_as_it_comes_in():
    layer, x = _layer(K.kInt8DynamicTokenSym), torch.randn(2, 16).to(torch.bfloat16)
    with pytest.raises(fq.ShapeMismatchError, match="blk.0.proj: bias must be a 1-D tensor \\[N\\], got \\(8, 1\\)"):
        layer.bias = torch.zeros(8, 1)
    with pytest.raises(fq.QuantDTypeError, match="blk.0.proj: bias must be floating point \\(it is held in the output "
                                                 "dtype\\), got torch.int32"):
        layer.bias = torch.zeros(8, dtype=torch.int32)  # e.g. a pre-scaled int32 bias: its values would be wrong
    # its N and device against the weight's at the next call: loaders set the bias before the weight, or beside a
    # weight still on the meta device
    for bias, error, message in [(torch.zeros(7), fq.ShapeMismatchError,
                                  "the weight has N=8 output channels, its bias 7 values"),
                                 (torch.zeros(8, device="meta"), fq.DeviceMismatchError, "bias is on meta")]:
        layer.bias = bias
        with pytest.raises(error, match="blk.0.proj: " + message):
            layer(x)
    layer.bias = torch.ones(8, dtype=torch.float32)  # held in the output dtype, as the constructor holds it
    assert layer.bias.dtype == torch.bfloat16 and torch.equal(layer.bias, torch.ones(8, dtype=torch.bfloat16))
    layer(x)
    with pytest.raises(TypeError, match="blk.0.proj: weight_scale must be a torch.Tensor, got NoneType"):
        layer.weight_scale = None
    for bad, error, what in [(torch.zeros(8, 16, 2, dtype=torch.int8), fq.ShapeMismatchError, "must be 2-D"),
                             (torch.zeros(128, dtype=torch.int8), fq.ShapeMismatchError, "must be 2-D"),
                             (torch.zeros(8, 16, dtype=torch.float8_e4m3fn), fq.QuantDTypeError, "needs int8 weights"),
                             (1.5, TypeError, "weight must be a torch.Tensor, got float")]:
        with pytest.raises(error, match=f"blk.0.proj: .*{what}"):
            layer.weight = bad
    assert "in_features=16" in repr(layer)


def test_a_strided_scale_or_bias_is_held_contiguous():
    """A bound call never holds a copy of the layer's tensors (a write into them would leave it stale): the layer
    holds its weight scale and bias contiguous, whatever layout they were given in."""
    layer = _layer(K.kInt8DynamicTokenSym)
    pairs = torch.cat([layer.weight_scale, layer.weight_scale], 1)  # [N, 2]: column 0 is a strided view
    bias2 = torch.stack([layer.bias, layer.bias], 1)
    built = fq.QuantLinear(layer.weight, pairs[:, 0], K.kInt8DynamicTokenSym, bias=bias2[:, 1])
    assert built.weight_scale.is_contiguous() and built.bias.is_contiguous()
    built.weight_scale, built.bias = pairs[:, 1], bias2[:, 0]
    assert built.weight_scale.is_contiguous() and built.bias.is_contiguous()
    built.load_state_dict({**built.state_dict(), "weight_scale": pairs[:, :1], "bias": bias2[:, 0]}, assign=True)
    assert built.weight_scale.is_contiguous() and built.bias.is_contiguous()


@pytest.mark.parametrize("make", [lambda x: x.to_sparse(), lambda x: x.to_sparse_csr(),
                                  lambda x: torch.nested.nested_tensor([x, x[:1]])], ids=["coo", "csr", "nested"])
def test_sparse_and_nested_inputs_are_refused_by_name(make):
    layer = _layer(K.kInt8DynamicTokenSym)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested tensor's prototype warning
        x = make(torch.randn(2, 16).to(torch.bfloat16))
    expect = "must be a dense \\(strided\\) tensor, got (a nested tensor|layout torch.sparse)"
    with pytest.raises(fq.LayoutError, match=f"blk.0.proj: activation {expect}"):
        layer(x)
    with pytest.raises(fq.LayoutError, match=f"silu_and_mul input {expect}"):
        fq.fused_act_quant("silu_and_mul", make(torch.randn(2, 32).to(torch.bfloat16)), K.kInt8DynamicTokenSym)
    assert not layer._bound


def test_a_wrong_python_type_is_a_type_error_naming_what_was_expected():
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(2, 32).to(torch.bfloat16)
    cases = [
        (lambda: fq.fused_act_quant(x, "silu_and_mul", K.kInt8DynamicTokenSym),
         "fused_act_quant: act must be an activation name .* got Tensor; the order is fused_act_quant\\(act, x, key\\)"),
        (lambda: fq.maybe_fused_act_quant(None, x, None), "act_fn must be the model's activation module .*got NoneType"),
        (lambda: fq.maybe_fused_act_quant(fq.SiluAndMul(), x, "down"),
         "the consumer layer must be a torch.nn.Module or None, got str 'down'"),
        (lambda: fq.get_input_quant_key("down"), "the consumer layer must be a torch.nn.Module or None, got str"),
        (lambda: fq.expose_input_quant_key("down", K.kInt8DynamicTokenSym),
         "expose_input_quant_key: layer must be a torch.nn.Module, got str"),
        (lambda: fq.name_quant_linears("model"), "name_quant_linears: model must be a torch.nn.Module, got str"),
        # swapped arguments: the tensor's type and shape, not its values (thousands of characters), and the order
        (lambda: fq.maybe_fused_act_quant(x, fq.SiluAndMul(), layer),
         r"act_fn must be the model's activation module .*got Tensor of shape \[2, 32\]; the arguments are "
         r"\(act_fn, x, consumer\)"),
        (lambda: fq.maybe_fused_act_quant(fq.SiluAndMul(), layer, x),
         r"the consumer layer must be a torch.nn.Module or None, got Tensor of shape \[2, 32\]$"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message):
            call()
    assert fq.get_input_quant_key(layer) is K.kInt8DynamicTokenSym and fq.get_input_quant_key(None) is None
    assert fq.get_input_quant_key(nn.ReLU()) is None

    class Consumer:  # a consumer of another kind that says what it needs
        requires_unquantized_input = True

    assert fq.get_input_quant_key(Consumer()) is None


@pytest.mark.parametrize("shape", [(8, 2), (4, 2), (2, 4, 1)])
def test_a_weight_scale_of_another_layout_is_refused_on_every_way_in(shape):
    layer = _layer(K.kInt8DynamicTokenSym)
    bad = torch.full(shape, 0.01)
    def message(count):
        return re.escape(f"weight_scale: must hold {count} along one dim ([N], [N, 1] or [1, N]) or one element (per "
                         f"tensor), got shape {tuple(shape)}")

    one_each, eight = "one scale per output channel", "N=8 scales (per channel)"
    with pytest.raises(fq.ScaleError, match="blk.0.proj: " + message(one_each)):
        layer.weight_scale = bad
    with pytest.raises(fq.ScaleError, match="QuantLinear: " + message(eight)):
        fq.QuantLinear(layer.weight, bad, K.kInt8DynamicTokenSym)
    with pytest.raises(fq.ScaleError, match="blk.0.proj: the state dict's " + message(one_each)):
        layer.load_state_dict(dict(layer.state_dict(), weight_scale=bad))
    qa = fq.quantize(torch.randn(2, 16), K.kInt8DynamicTokenSym)
    with pytest.raises(fq.ScaleError, match="quant_gemm: weight " + re.escape("scale: must hold N=8 scales")):
        fq.quant_gemm(qa, layer.weight, bad, None, out_dtype=torch.bfloat16)


@pytest.mark.parametrize("shape", [(8,), (8, 1), (1, 8), (8, 1, 1), (), (1,), (1, 1, 1)])
def test_a_weight_scale_along_one_dim_is_taken_in_any_such_shape(shape):
    layer, x = _layer(K.kInt8DynamicTokenSym), torch.randn(2, 16).to(torch.bfloat16)
    scale = layer.weight_scale.reshape(shape) if layer.weight_scale.numel() == math.prod(shape) else \
        layer.weight_scale[:1].reshape(shape)
    built = fq.QuantLinear(layer.weight, scale, K.kInt8DynamicTokenSym, bias=layer.bias)
    layer.weight_scale = scale
    assert built.weight_scale.shape == layer.weight_scale.shape == (scale.numel(), 1)
    assert torch.equal(built(x), layer(x))


@pytest.mark.parametrize("assign", [False, True])
@pytest.mark.parametrize("shape", [(8,), (1, 8), (8, 1, 1)])
def test_a_state_dicts_weight_scale_along_one_dim_loads_as_the_layer_holds_it(shape, assign):
    """A state dict's per-channel scale in another one-dim shape loads as every other way in takes it (it was torch's
    size mismatch); one of another count is refused naming both counts, the layer unchanged."""
    layer, x = _layer(K.kInt8DynamicTokenSym), torch.randn(2, 16).to(torch.bfloat16)
    want = layer(x)
    saved = layer.state_dict()
    target = _layer(K.kInt8DynamicTokenSym)
    target.load_state_dict(dict(saved, weight_scale=saved["weight_scale"].reshape(shape) * 2), assign=assign)
    assert target.weight_scale.shape == (8, 1) and target.weight_scale.dtype == torch.float32
    assert torch.equal(target.weight_scale, layer.weight_scale * 2) and not torch.equal(target(x), want)
    target.load_state_dict(dict(saved, weight_scale=saved["weight_scale"].reshape(shape)), assign=assign)
    assert torch.equal(target(x), want)
    before = target.weight_scale.clone()
    with pytest.raises(fq.ScaleError, match=re.escape("blk.0.proj: the state dict's weight_scale has 1 element, this "
                                                      "layer holds 8 (per channel)")):
        target.load_state_dict(dict(saved, weight_scale=torch.tensor([0.5])), assign=assign)
    assert torch.equal(target.weight_scale, before)


@pytest.mark.parametrize("assign", [False, True])
@pytest.mark.parametrize("scale", [torch.tensor(0.25), torch.tensor([[0.25]]), torch.tensor([0.25], dtype=torch.float64),
                                   torch.tensor([0.25], dtype=torch.bfloat16)], ids=["0-d", "1x1", "float64", "bf16"])
def test_a_state_dicts_static_scale_of_one_float_loads_as_float32_one_element(scale, assign):
    """A static input scale in a state dict loads as every way in holds it, float32 [1]: a 0-d or [1, 1] scale was
    torch's size mismatch, and with assign=True a float64 or bf16 one the layer's refusal inside torch's error."""
    layer, x = _layer(K.kInt8StaticTensorSym), torch.randn(2, 16).to(torch.bfloat16)
    layer.load_state_dict(dict(layer.state_dict(), input_scale=scale), assign=assign)
    assert layer.input_scale.shape == (1,) and layer.input_scale.dtype == torch.float32
    assert float(layer.input_scale) == 0.25
    want = fq.QuantLinear(layer.weight, layer.weight_scale, K.kInt8StaticTensorSym, bias=layer.bias, input_scale=0.25)
    assert torch.equal(layer(x), want(x))


def test_a_state_dict_that_does_not_fit_the_layer_is_refused_by_the_package_naming_it():
    """What torch's loader reported as a size mismatch (or cast silently) is the package's error, naming the layer:
    an integer or two-element static scale, a weight of another shape; the layer is left as it was."""
    layer = _layer(K.kInt8StaticTensorSym)
    saved, before = layer.state_dict(), {k: v.clone() for k, v in layer.state_dict().items()}
    cases = [(dict(saved, input_scale=torch.tensor([1], dtype=torch.int32)), fq.QuantDTypeError,
              "blk.0.proj: the state dict's input_scale is torch.int32; a static scale is float"),
             (dict(saved, input_scale=torch.tensor([0.25, 0.25])), fq.ScaleError,
              "blk.0.proj: the state dict's input_scale has shape (2,); a static per-tensor scale has one element"),
             (dict(saved, weight=torch.zeros(8, 32, dtype=torch.int8)), fq.ShapeMismatchError,
              "blk.0.proj: the state dict's weight is [N, K] = [8, 32], this layer's [8, 16]")]
    for state, error, message in cases:
        for assign in (False, True):
            with pytest.raises(error, match=re.escape(message)):
                layer.load_state_dict(state, assign=assign)
            assert all(torch.equal(layer.state_dict()[k], v) for k, v in before.items())


def test_an_assigned_static_scale_of_one_element_is_held_as_one_element():
    """``layer.input_scale = tensor([[s]])`` is held as [1] (a view of it), as set_input_scale holds one: its
    state dict loads into a layer built as usual."""
    layer = _layer(K.kInt8StaticTensorSym)
    given = torch.tensor([[0.3]])
    layer.input_scale = given
    assert layer.input_scale.shape == (1,)
    given.fill_(0.4)  # a view: a write into the tensor given reaches the layer (checked again at the next call)
    assert float(layer.input_scale) == pytest.approx(0.4)
    _layer(K.kInt8StaticTensorSym).load_state_dict(layer.state_dict())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=str)
def test_a_non_finite_bias_is_refused_on_every_way_in(value):
    """A bias is checked where it comes in, as weight scales are: finite in the output dtype the layer holds it in
    (before, a NaN or infinite bias was kept and every token's output channel became it)."""
    layer = _layer(K.kInt8DynamicTokenSym)
    bad = layer.bias.float().clone()
    bad[3] = value
    message = re.escape(f"bias: a bias must be finite in the layer's output dtype torch.bfloat16, got {value!r} for "
                        "output channel 3 (1 such values)")
    with pytest.raises(fq.BiasError, match="QuantLinear: " + message):
        fq.QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, bias=bad)
    linear = nn.Linear(16, 8).to(torch.bfloat16)
    with torch.no_grad():
        linear.bias[3] = value
    with pytest.raises(fq.BiasError, match="lin: " + message):
        fq.QuantLinear.from_float(linear, K.kInt8DynamicTokenSym, name="lin")
    with pytest.raises(fq.BiasError, match="blk.0.proj: " + message):
        layer.bias = bad
    for assign in (False, True):
        with pytest.raises(fq.BiasError, match="blk.0.proj: the state dict's " + message):
            layer.load_state_dict(dict(layer.state_dict(), bias=bad), assign=assign)
    assert torch.isfinite(layer.bias).all()


def test_a_bias_in_the_state_dict_of_a_layer_without_one_is_torchs_unexpected_key():
    """A layer built without a bias reads no bias from a state dict: strict=False loads the rest, whatever its values
    (its check of a bias it does not hold refused a NaN one)."""
    torch.manual_seed(0)
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8, bias=False), K.kInt8DynamicTokenSym, name="nobias")
    state = dict(layer.state_dict(), bias=torch.full((8,), float("nan")))
    result = layer.load_state_dict(state, strict=False)
    assert result.unexpected_keys == ["bias"] and layer.bias is None


def test_a_bias_beyond_the_new_output_dtypes_range_is_refused_and_the_layer_kept():
    """A float32 bias beyond fp16's range would be held as an infinity once the output dtype is fp16: ``.half()``, the
    ``out_dtype`` setter and a build in fp16 refuse it, naming the value and what it would become."""
    torch.manual_seed(0)
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8), K.kInt8DynamicTokenSym, name="wide")
    with torch.no_grad():
        layer.bias[5] = 1e5
    message = re.escape("wide: bias: a bias must be finite in the layer's output dtype torch.float16, got 100000.0 "
                        "(inf as torch.float16) for output channel 5")
    for change in (lambda: layer.half(), lambda: setattr(layer, "out_dtype", torch.float16)):
        with pytest.raises(fq.BiasError, match=message):
            change()
        assert layer.out_dtype == layer.bias.dtype == torch.float32 and layer.bias[5] == 1e5
    with pytest.raises(fq.BiasError, match=message.replace("wide", "QuantLinear")):
        fq.QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, bias=layer.bias,
                       out_dtype=torch.float16)
    assert layer.bfloat16().bias.dtype == torch.bfloat16  # within bf16's range: taken


def test_a_swapped_hcu_pair_is_named_so():
    layer = _layer(K.kInt8DynamicTokenSym)
    qa = fq.fused_act_quant("identity", torch.randn(3, 16).to(torch.bfloat16), K.kInt8DynamicTokenSym)
    with pytest.raises(fq.QuantDTypeError, match="blk.0.proj: x_and_scale_quanted is \\(xq, xs\\), the quantized "
                                                 "activation then its float32 scale; got \\(torch.float32 \\(3, 1\\), "
                                                 "torch.int8 \\(3, 16\\)\\): the two are swapped"):
        layer(x_and_scale_quanted=(qa.scale, qa.data))
    assert torch.equal(layer(x_and_scale_quanted=(qa.data, qa.scale)), layer(qa))


def test_a_per_token_scale_of_the_right_count_but_another_layout_says_so():
    xq = torch.zeros(2, 5, 16, dtype=torch.int8)
    w, ws = torch.zeros(8, 16, dtype=torch.int8), torch.ones(8, 1)
    with pytest.raises(fq.ShapeMismatchError, match="got shape \\(5, 2, 1\\): the token count matches, not the layout"):
        fq.gemm.checked_gemm(xq, torch.ones(5, 2, 1), w, ws, None, torch.bfloat16, "int8_dynamic_token", "", "torch")
    with pytest.raises(fq.ShapeMismatchError, match="got shape \\(3, 1\\): token count mismatch between xq and xs"):
        fq.gemm.checked_gemm(xq, torch.ones(3, 1), w, ws, None, torch.bfloat16, "int8_dynamic_token", "", "torch")


def test_the_dcu_module_checks_its_numerics_profile_when_built():
    with pytest.raises(fq.NumericsProfileError, match="unknown numerics profile 'bogus'"):
        fq.FusedSiluAndMulAndQuant("bogus")
    assert fq.FusedSiluAndMulAndQuant("hcu").numerics == "hcu"
    assert fq.FusedSiluAndMulAndQuant("").numerics == ""  # as None: FUSED_QUANT_NUMERICS at each call


def test_shape_mismatch_error_keeps_its_message_however_it_is_made():
    import copy
    import pickle

    class LayerError(fq.ShapeMismatchError):  # a subclass that builds its own message
        def __init__(self, layer):
            super().__init__(f"bad layer {layer}", layer=layer)

    for err, message in [(fq.ShapeMismatchError("m", layer="L", k=3), "m"),
                         (fq.ShapeMismatchError(message="m", layer="L"), "m"), (LayerError("L"), "bad layer L")]:
        assert str(err) == message and err.layer == "L"
        if type(err) is fq.ShapeMismatchError:  # a copy is made by calling the class with the message
            for again in (copy.deepcopy(err), pickle.loads(pickle.dumps(err))):
                assert str(again) == message and again.layer == "L"


@pytest.mark.parametrize("key", [K.kFp8StaticTensorSym, K.kFp8DynamicTokenSym, K.kInt8StaticTensorSym,
                                 K.kInt8DynamicTokenSym], ids=K.key_name)
def test_autocast_changes_no_bit(key):
    """Under torch.autocast the FP8 GEMM's fp32 matmul ran in fp16 / bf16: other bits, and inf where fp16
    overflowed. Every key's layer, checked and bound calls, and the functional quant_gemm, equal their outputs
    outside the region."""
    torch.manual_seed(0)
    layer = fq.QuantLinear.from_float(nn.Linear(64, 32).to(torch.bfloat16), key, 0.05 if K.is_static(key) else None)
    x = torch.randn(5, 64).to(torch.bfloat16)
    with torch.no_grad():
        want = layer(x)
        qa = fq.fused_act_quant("identity", x, key, layer.input_scale)
        want_gemm = fq.quant_gemm(qa, layer.weight, layer.weight_scale, layer.bias, out_dtype=torch.bfloat16)
        for dtype in (torch.float16, torch.bfloat16):
            fresh = copy.deepcopy(layer)  # no bound calls: its first call takes the checked path
            with torch.autocast("cpu", dtype=dtype):
                for call in ("checked", "bound"):
                    assert_bits_equal(fresh(x), want, f"{K.key_name(key)} {dtype} {call} call")
                got = fq.quant_gemm(qa, layer.weight, layer.weight_scale, layer.bias, out_dtype=torch.bfloat16)
                assert_bits_equal(got, want_gemm, f"{K.key_name(key)} {dtype} quant_gemm")


@pytest.mark.filterwarnings("ignore:`torch.jit.*is deprecated:DeprecationWarning")  # torch's own notice
def test_torchscript_is_refused_by_name():
    """torch.jit.trace would record no Triton or driver launch (on a GPU its graph returns memory no kernel wrote),
    also where the layer's call is bound already or runs through linear_act_quant; script cannot compile it."""
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8).to(torch.bfloat16), K.kInt8DynamicTokenSym, name="blk.down")
    x = torch.randn(3, 16).to(torch.bfloat16)
    with torch.no_grad():
        layer(x)  # bound
        for make in (lambda: torch.jit.script(layer), lambda: torch.jit.script(nn.Sequential(layer)),
                     lambda: torch.jit.trace(layer, x),
                     lambda: torch.jit.trace(lambda t: fq.linear_act_quant(layer, t, fq.SiluAndMul(), None), x)):
            with pytest.raises(fq.UnsupportedError, match="blk.down: .*TorchScript cannot hold fused-quant's modules"):
                make()
        assert torch.equal(layer(x), layer(x))  # still callable after the refusals


def test_fx_symbolic_trace_is_refused_by_name_and_a_leaf_module_traces():
    """torch.fx.symbolic_trace passes Proxies: the layer said "x must be a tensor ..., got Proxy" and
    FusedSiluAndMulAndQuant "silu_and_mul input must be a torch.Tensor": both name what cannot trace and the ways
    that can; a tracer that keeps the layer a leaf traces, and its graph computes what the layer does."""
    layer = fq.QuantLinear.from_float(nn.Linear(16, 8).to(torch.bfloat16), K.kInt8DynamicTokenSym, name="blk.down")
    with pytest.raises(fq.UnsupportedError, match="blk.down: torch.fx.symbolic_trace cannot trace into fused-quant's "
                                                  "modules .*use torch.compile or torch.export"):
        torch.fx.symbolic_trace(nn.Sequential(nn.ReLU(), layer))
    with pytest.raises(fq.UnsupportedError, match="FusedSiluAndMulAndQuant: torch.fx.symbolic_trace cannot trace"):
        torch.fx.symbolic_trace(fq.FusedSiluAndMulAndQuant())

    class Leaves(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, fq.QuantLinear) or super().is_leaf_module(m, qualname)

    model = nn.Sequential(nn.ReLU(), layer)
    traced = torch.fx.GraphModule(model, Leaves().trace(model))
    x = torch.randn(3, 16).to(torch.bfloat16)
    assert torch.equal(traced(x), layer(torch.relu(x)))


def test_del_of_a_layer_tensor_is_setting_it_to_none():
    layer = _layer(K.kInt8DynamicTokenSym)
    x = torch.randn(3, 16).to(torch.bfloat16)
    no_bias = fq.QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym)
    del layer.bias  # was a KeyError at the next call
    assert layer.bias is None and torch.equal(layer(x), no_bias(x))
    with pytest.raises(TypeError, match="blk.0.proj: weight must be a torch.Tensor, got NoneType"):
        del layer.weight
    static = _layer(K.kInt8StaticTensorSym)
    with pytest.raises(fq.ScaleError, match="a static key needs its scale"):
        del static.input_scale
    assert static.input_scale is not None


def test_a_reset_drops_every_stale_bound_call_at_the_next_bind():
    """Bound calls from before a reset are dropped when the layer binds its next call, whatever its signature (they
    were kept until the same signature bound again)."""
    layer = _layer(K.kInt8DynamicTokenSym)
    with torch.no_grad():
        for m in (3, 4):
            layer(torch.randn(m, 16).to(torch.bfloat16))
        assert len(layer._bound) == 2
        fq.reset()
        layer(torch.randn(5, 16).to(torch.bfloat16))
    assert len(layer._bound) == 1



# --- values that came in unchecked: a review's findings -----------------------------------------

@pytest.mark.parametrize("bias", [torch.full((8,), 123456, dtype=torch.int32), torch.ones(8, dtype=torch.bool)],
                         ids=["int32", "bool"])
@pytest.mark.parametrize("assign", [False, True])
def test_a_state_dict_bias_that_is_not_float_is_refused_not_cast(bias, assign):
    """A copy into the layer's bf16 bias cast it (123456 became 123392, True became 1.0) though the constructor and
    assignment refuse such a bias; with assign=True torch wrapped the refusal in its RuntimeError."""
    layer = _layer(K.kInt8DynamicTokenSym)
    held = layer.bias.clone()
    state = {**layer.state_dict(), "bias": bias}
    with pytest.raises(fq.QuantDTypeError, match=rf"blk.0.proj: the state dict's bias is {bias.dtype}; a bias is "
                                                 r"floating point \(held in the output dtype torch.bfloat16\)"):
        layer.load_state_dict(state, assign=assign)
    assert torch.equal(layer.bias, held)


def _nan_fp8(dtype, at=(3, 5)):
    """Random FP8 weights with one NaN, at ``at``: no other byte is NaN in either format (e4m3fn's -0, 0x80, is
    e4m3fnuz's NaN)."""
    w = torch.randn(8, 16).to(dtype).view(torch.uint8)
    w[w == 0x80] = 0
    w[at] = 0x80 if dtype == torch.float8_e4m3fnuz else 0x7F
    return w.view(dtype)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e4m3fnuz], ids=str)
def test_fp8_weights_holding_nan_are_refused_on_every_way_in(dtype):
    """A NaN code made its output channel NaN for every token, built, assigned or loaded alike."""
    said = re.escape(f"{dtype} weights must not hold NaN, got NaN at [3, 5] (1 such values): output channel 3")
    w, ws = _nan_fp8(dtype), torch.rand(8) + 0.5
    with pytest.raises(fq.UnsupportedError, match=said):
        fq.QuantLinear(w, ws, K.kFp8DynamicTokenSym, out_dtype=torch.bfloat16)
    good = fq.QuantLinear(w.view(torch.uint8).clamp(max=0x70).view(dtype), ws, K.kFp8DynamicTokenSym,
                          out_dtype=torch.bfloat16, name="l")
    held = good.weight.clone()
    with pytest.raises(fq.UnsupportedError, match="l: weight: " + said):
        good.weight = w
    for assign in (False, True):
        with pytest.raises(fq.UnsupportedError, match=said):
            good.load_state_dict({**good.state_dict(), "weight": w}, assign=assign)
    assert torch.equal(good.weight.view(torch.uint8), held.view(torch.uint8))
    # what is not NaN in one format may be in the other: e4m3fnuz's 0x7f is its largest value, e4m3fn's 0x80 is -0
    other = torch.float8_e4m3fn if dtype == torch.float8_e4m3fnuz else torch.float8_e4m3fnuz
    fine = w.view(torch.uint8).view(other)
    assert fq.QuantLinear(fine, ws, K.kFp8DynamicTokenSym, out_dtype=torch.bfloat16).weight is fine
    with torch.device("meta"):  # no values to read: accepted, as meta scales are
        fq.QuantLinear(torch.empty(8, 16, dtype=dtype), torch.empty(8), K.kFp8DynamicTokenSym)


@pytest.mark.parametrize("width", [1, 3, 127])
def test_silu_and_mul_refuses_an_odd_width_on_every_path(width):
    """SiluAndMul broadcast silu of one gate column over the up half ([4, 3] gave [4, 2]; [4, 1] gave [4, 0]), and so
    did the unfused path of maybe_fused_act_quant for a float consumer."""
    x = torch.randn(4, width)
    said = rf"silu_and_mul input's last dim holds \[gate \| up\] and must be even; got shape \(4, {width}\)"
    with pytest.raises(fq.ShapeMismatchError, match=said):
        fq.SiluAndMul()(x)
    with pytest.raises(fq.ShapeMismatchError, match=said):
        fq.maybe_fused_act_quant(fq.SiluAndMul(), x, nn.Linear(max(width // 2, 1), 8))
    assert torch.equal(fq.SiluAndMul()(torch.ones(4, 2)), torch.nn.functional.silu(torch.ones(4, 1)))


def test_quant_gemm_under_compile_refuses_the_gradient():
    """Compiled, quant_gemm's custom op had no autograd formula: a bias that requires grad failed in the compiler
    (aot_eager) or gave an output whose backward failed, in torch's words. Eager, the call is refused; compiled, where
    a raise would be traced into the graph, the gradient is refused in the same words (as AOTAutograd compiles it, or
    at backward). A compile under no_grad afterwards, fullgraph too, runs bitwise as eager."""
    layer = _layer(K.kInt8DynamicTokenSym)
    qa = registry.quantize(torch.randn(2, 16), layer.input_key)
    bias = torch.randn(8, dtype=torch.bfloat16, requires_grad=True)
    said = r"quant_gemm: the quantized GEMM is inference only; its bias require\(s\) grad"

    def call(bias):
        return fq.quant_gemm(qa, layer.weight, layer.weight_scale, bias, out_dtype=torch.bfloat16)

    torch._dynamo.reset()
    with pytest.raises(fq.UnsupportedError, match=said):
        call(bias)
    out = torch.compile(call, backend="eager", fullgraph=True)(bias)
    with pytest.raises(fq.UnsupportedError, match=said):
        out.sum().backward()
    assert bias.grad is None
    with pytest.raises(Exception, match=said):  # AOTAutograd traces the backward as it compiles: refused then
        torch.compile(call, backend="aot_eager", fullgraph=True)(bias)
    with torch.no_grad():
        assert torch.equal(torch.compile(call, backend="eager", fullgraph=True)(bias), call(bias))


def test_the_grad_refusal_names_what_requires_grad():
    layer = _layer(K.kInt8DynamicTokenSym)
    layer.weight_scale.requires_grad_()
    with pytest.raises(fq.UnsupportedError, match=r"inference only \(its quantized forward has no gradient\), and "
                                                  r"its weight_scale require\(s\) grad"):
        layer(torch.randn(2, 16))


@pytest.mark.parametrize("key", [K.kInt8StaticTensorSym, K.kInt8DynamicTokenSym], ids=K.key_name)
def test_an_activation_on_another_device_names_the_layer_and_its_weight(key):
    """A static layer said its scale was on another device than the activation, naming no layer."""
    layer = _layer(key)
    with pytest.raises(fq.DeviceMismatchError, match="blk.0.proj: weight is on cpu, activation on meta"):
        layer(torch.randn(2, 16, device="meta"))


def test_sparse_scales_weights_and_biases_are_refused_by_name():
    """Sparse tensors failed deep in torch (reshape not implemented, after the GEMM for a bias), or a sparse weight
    was told to be .contiguous()."""
    layer = _layer(K.kInt8DynamicTokenSym)
    qa = registry.quantize(torch.randn(2, 16), layer.input_key)
    sparse = re.escape("must be a dense (strided) tensor, got layout torch.sparse_coo; pass t.to_dense()")
    with pytest.raises(fq.LayoutError, match="blk.0.proj: weight_scale " + sparse):
        layer.weight_scale = torch.rand(8).to_sparse()
    with pytest.raises(fq.LayoutError, match="blk.0.proj: weight " + sparse):
        layer.weight = layer.weight.to_sparse()
    for assign, what in ((False, "weight"), (True, "weight \\(assign=True\\): weight")):
        with pytest.raises(fq.LayoutError, match=f"blk.0.proj: the state dict's {what} " + sparse):
            layer.load_state_dict({**layer.state_dict(), "weight": layer.weight.to_sparse()}, assign=assign)
    with pytest.raises(fq.LayoutError, match="blk.0.proj: bias " + sparse):
        layer.bias = torch.ones(8, dtype=torch.bfloat16).to_sparse()
    for what, args in (("bias", (layer.weight_scale, torch.ones(8, dtype=torch.bfloat16).to_sparse())),
                       ("weight scale", (layer.weight_scale.to_sparse(), None))):
        with pytest.raises(fq.LayoutError, match=f"quant_gemm: {what} " + sparse):
            fq.quant_gemm(qa, layer.weight, *args, out_dtype=torch.bfloat16)
    with pytest.raises(fq.LayoutError, match="quant_gemm: activation scale " + sparse):
        fq.quant_gemm(dataclasses.replace(qa, scale=qa.scale.to_sparse()), layer.weight,
                      layer.weight_scale, None, out_dtype=torch.bfloat16)


def test_a_weight_of_another_n_is_named_as_that():
    """A weight of 16 output channels assigned to a layer of 8 was reported as a weight scale of the wrong length."""
    layer = _layer(K.kInt8DynamicTokenSym)
    layer.weight = torch.zeros(16, 16, dtype=torch.int8)
    with pytest.raises(fq.ShapeMismatchError, match=re.escape(
            "blk.0.proj: the weight has N=16 output channels, its weight_scale 8 scales and bias 8 values; assign a "
            "layer's weight, weight_scale and bias together")):
        layer(torch.randn(2, 16))
    layer.weight_scale, layer.bias = torch.ones(16), torch.zeros(16, dtype=torch.bfloat16)
    assert torch.equal(layer(torch.randn(2, 16)), torch.zeros(2, 16, dtype=torch.bfloat16))


# --- registration that would otherwise leave a wrong provider or producer serving --------------------------------

def _zeros_gemm(xq, xs, w, ws, bias, out_dtype):
    return torch.zeros(xq.shape[0], w.shape[0], dtype=out_dtype)


def test_a_provider_registered_again_for_other_backends_leaves_no_old_entry(monkeypatch):
    """Re-registering a name for some backends takes the all-backends entry of that name out (it would still answer
    first, giving zeros here); registering it for all backends takes out every entry; ``first=False`` for all
    backends comes after each backend's own providers, the torch backend's exact ones included."""
    monkeypatch.setattr(fq.gemm, "_PROVIDERS", {name: list(chain) for name, chain in fq.gemm._PROVIDERS.items()})
    layer, x = _layer(K.kInt8DynamicTokenSym), torch.randn(3, 16, dtype=torch.bfloat16)
    want = layer(x)
    fq.register_gemm_provider("plugin_int8", _zeros_gemm, kind="int8")  # every backend, first
    assert not layer(x).any()
    fq.register_gemm_provider("plugin_int8", _zeros_gemm, kind="int8", backends=("triton_fp8",))
    assert [name for name, chain in fq.gemm._PROVIDERS.items() if any(p.name == "plugin_int8" for p in chain)] == [
        "triton_fp8"]
    assert_bits_equal(layer(x), want, "the all-backends entry is gone")
    fq.register_gemm_provider("plugin_int8", _zeros_gemm, kind="int8", backends=("torch",))
    assert not layer(x).any()
    fq.register_gemm_provider("plugin_int8", _zeros_gemm, kind="int8", first=False)  # replaces both
    assert [p.name for p in fq.gemm.gemm_providers("torch", "int8")] == ["torch_int8_f64", "plugin_int8"]
    assert [p.name for p in fq.gemm.gemm_providers("triton_fp8", "int8")][-1] == "plugin_int8"
    assert_bits_equal(layer(x), want, "first=False: after the torch backend's exact GEMM")
    fq.unregister_gemm_provider("plugin_int8")
    assert "plugin_int8" not in fq.gemm.provider_names()
    with pytest.raises(fq.GemmProviderError, match="no GEMM provider is registered as 'plugin_int8'; registered: "):
        fq.unregister_gemm_provider("plugin_int8")  # a misspelt cleanup would leave the provider serving


def test_a_producer_registered_twice_needs_replace_and_unregister_puts_the_old_back(monkeypatch):
    """A backend's producer for an activation and key (the torch backend's are the reference every backend falls
    back to) is not replaced silently, also not through a subclass of the activation that keeps its forward;
    ``replace=True`` replaces it and ``unregister_producer`` puts the replaced one back."""
    monkeypatch.setattr(registry, "_PRODUCERS", {k: dict(v) for k, v in registry._PRODUCERS.items()})
    key, x = K.kInt8DynamicTokenSym, torch.randn(4, 16)
    want = fq.fused_act_quant("silu_and_mul", x, key)

    class MySilu(fq.SiluAndMul):  # the same forward: silu_and_mul
        pass

    def zeros(x, scale, *, numerics, fp8_dtype):
        return torch.zeros(x.shape[0], x.shape[1] // 2, dtype=torch.int8), torch.ones(x.shape[0], 1)

    for act_type in (fq.SiluAndMul, MySilu):
        with pytest.raises(fq.ProducerError, match="backend torch has a producer for silu_and_mul -> "
                                                   "int8_dynamic_token already .*pass replace=True"):
            fq.register_producer(act_type, key, backend="torch")(zeros)
    assert_bits_equal(fq.fused_act_quant("silu_and_mul", x, key).data, want.data, "refused: the reference serves")
    fq.register_producer(MySilu, key, backend="torch", replace=True)(zeros)
    fq.register_producer(MySilu, key, backend="torch")(zeros)  # the same producer again (a plugin's second run): kept
    fq.register_producer(MySilu, key, backend="torch", replace=True)(zeros)  # and not stacked on itself
    assert not fq.fused_act_quant("silu_and_mul", x, key).data.any()
    fq.unregister_producer(MySilu, key, backend="torch")
    assert_bits_equal(fq.fused_act_quant("silu_and_mul", x, key).data, want.data, "the reference is back")
    with pytest.raises(fq.ProducerError, match="the torch backend's producer for silu_and_mul -> int8_dynamic_token "
                                               "is the reference every backend falls back to"):
        fq.unregister_producer(fq.SiluAndMul, key, backend="torch")  # the reference itself stays
    assert_bits_equal(fq.fused_act_quant("silu_and_mul", x, key).data, want.data, "the reference stays")


def test_unregister_producer_takes_out_another_backends_producer_and_names_a_missing_one(fake_backend):  # noqa: F811
    key = K.kInt8DynamicTokenSym
    fq.register_producer(fq.ReLUSquared, key, backend=TEST_BACKEND)(lambda x, scale, **kw: None)
    fq.unregister_producer(fq.ReLUSquared, key, backend=TEST_BACKEND)
    assert registry._PRODUCERS[TEST_BACKEND] == {}
    with pytest.raises(fq.ProducerError, match=f"backend '{TEST_BACKEND}' has no producer for relu2 -> "
                                               "int8_dynamic_token"):
        fq.unregister_producer(fq.ReLUSquared, key, backend=TEST_BACKEND)


def test_values_of_the_wrong_python_type_are_type_errors_naming_what_came():
    """README: an argument of the wrong Python type raises TypeError, naming it, not another error or None."""
    key = K.kInt8DynamicTokenSym
    with pytest.raises(TypeError, match="as_quantized_activation: x must be a tensor or a QuantizedActivation, got "
                                        "list"):
        fq.as_quantized_activation([1], key)
    with pytest.raises(TypeError, match="QuantizedActivation: data and scale must be tensors, got list and Tensor"):
        QuantizedActivation([1], torch.ones(1, 1), torch.bfloat16, torch.Size([1, 1]), key)
    with pytest.raises(TypeError, match="linear_act_quant: linear must be the linear module, got str 'lin'"):
        fq.linear_act_quant("lin", torch.randn(2, 16), fq.SiluAndMul(), None)
    with pytest.raises(TypeError, match=r"linear must be the linear module, got Tensor of shape \[2, 16\]; the "
                                        r"arguments are \(linear, x, act_fn, consumer\)$"):  # x first: not its repr
        fq.linear_act_quant(torch.randn(2, 16), nn.Linear(16, 8), fq.SiluAndMul(), None)
    layer = _layer(key)
    with pytest.raises(TypeError, match="blk.0.proj: x must be a tensor or QuantizedActivation, got list"):
        layer([1.0] * 16)
    # the producers build QuantizedActivations by position: the fields' order is part of the contract
    assert [f.name for f in dataclasses.fields(QuantizedActivation)] == ["data", "scale", "orig_dtype", "orig_shape",
                                                                         "quant_key"]


@pytest.mark.parametrize("fn,what", [(lambda x, scale: None, "the producer"),
                                     (lambda x, *, numerics, fp8_dtype: None, "the producer"),
                                     (lambda x, scale, numerics: None, "the producer")])
def test_a_producer_that_cannot_take_its_arguments_is_refused_at_registration(fn, what, fake_backend):  # noqa: F811
    with pytest.raises(TypeError, match=f"register_producer: {what} must take \\(x, scale, \\*, numerics, "
                                        "fp8_dtype\\), got "):
        fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend=TEST_BACKEND)(fn)
    ok = lambda x, scale, **kw: None  # noqa: E731
    with pytest.raises(TypeError, match="register_producer: bind must take"):
        fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend=TEST_BACKEND, bind=fn)(ok)
    assert registry._PRODUCERS[TEST_BACKEND] == {}


def test_a_producer_returning_strided_codes_is_named(fake_backend):  # noqa: F811
    """Codes laid out otherwise than row by row (a transposed input's elementwise result) are the producer's
    mistake, named as such, not a GEMM's layout error naming the layer."""
    @fq.register_producer(fq.ReLUSquared, K.kInt8DynamicTokenSym, backend=TEST_BACKEND)
    def prod(x, scale, *, numerics, fp8_dtype):
        return torch.zeros(x.shape[1], x.shape[0], dtype=torch.int8).t(), torch.ones(x.shape[0], 1)

    with pytest.raises(fq.ProducerError, match="prod .*q must be contiguous, got strides \\(1, 4\\)"):
        fq.fused_act_quant("relu2", torch.randn(4, 8), K.kInt8DynamicTokenSym)


def test_an_activation_with_hooks_or_its_own_forward_runs_as_called():
    """A producer stands in for the activation only where calling it runs its class's forward alone: a forward set
    on the instance, a forward hook, a pre-hook, or a global hook make ``maybe_fused_act_quant`` (and
    ``linear_act_quant``, also once bound) run the call itself, as the plain model would."""
    layer, up = _layer(K.kFp8StaticTensorSym, k=16, n=8), _layer(K.kInt8DynamicTokenSym, k=16, n=32)
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    plain = fq.SiluAndMul()
    assert type(fq.maybe_fused_act_quant(plain, torch.randn(3, 16), layer)) is QuantizedActivation

    def with_forward(act):
        act.forward = lambda h: torch.zeros(*h.shape[:-1], h.shape[-1] // 2, dtype=h.dtype)

    def clamped(act):
        act.register_forward_hook(lambda m, i, o: o.clamp(-0.01, 0.01))

    def halved(act):
        act.register_forward_pre_hook(lambda m, i: (i[0] / 2,))

    for change in (with_forward, clamped, halved):
        act = fq.SiluAndMul()
        change(act)
        h = torch.randn(3, 16)
        got = fq.maybe_fused_act_quant(act, h, layer)
        assert type(got) is torch.Tensor and torch.equal(got, act(h)), change.__name__
        for _ in range(3):  # the third call would run the bound one-kernel call
            got = fq.linear_act_quant(up, x, act, layer)
            assert type(got) is torch.Tensor and torch.equal(got, act(up(x))), change.__name__
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        assert type(fq.maybe_fused_act_quant(plain, torch.randn(3, 16), layer)) is torch.Tensor
    finally:
        handle.remove()


def test_fused_act_quant_refuses_a_module_with_hooks_or_its_own_forward():
    """``fused_act_quant`` takes a module for its type: one whose call runs more than its class's forward (a hook, a
    pre-hook, a forward set on the instance, a global hook) is refused by name; it gave the plain activation's codes,
    the hook skipped. Its name, or ``maybe_fused_act_quant``, is the way."""
    x = torch.ones(1, 4)
    assert fq.fused_act_quant(fq.SiluAndMul(), x, K.kInt8DynamicTokenSym).data.tolist() == [[127, 127]]
    hooked = [fq.SiluAndMul() for _ in range(3)]
    hooked[0].register_forward_hook(lambda m, i, o: o * 0)
    hooked[1].register_forward_pre_hook(lambda m, i: (i[0] / 2,))
    hooked[2].forward = lambda h: h[..., :2] * 0
    for act in hooked:
        for _ in range(2):  # also once a call of the type is bound
            with pytest.raises(fq.UnsupportedError, match="fused_act_quant: act SiluAndMul has forward hooks or a "
                                                          "forward of its own, which a producer standing in for it "
                                                          "would skip"):
                fq.fused_act_quant(act, x, K.kInt8DynamicTokenSym)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        with pytest.raises(fq.UnsupportedError, match="has forward hooks"):
            fq.fused_act_quant(fq.SiluAndMul(), x, K.kInt8DynamicTokenSym)
    finally:
        handle.remove()
    assert fq.fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym).data.tolist() == [[127, 127]]


def test_a_kernel_that_quantizes_its_own_input_takes_the_key_away():
    """vLLM's way: a kernel whose ``input_quant_key()`` is None quantizes its own input; a key exposed on the layer
    before is taken away, so producers stop sending it quantized activations."""
    class OwnInput:
        def input_quant_key(self):
            return None

    layer = nn.Linear(16, 8)
    fq.expose_input_quant_key(layer, K.kInt8DynamicTokenSym)
    assert fq.get_input_quant_key(layer) == K.kInt8DynamicTokenSym
    fq.expose_input_quant_key(layer, OwnInput())
    assert fq.get_input_quant_key(layer) is None
    fq.expose_input_quant_key(layer, OwnInput())  # nothing to take away: still none
    assert fq.get_input_quant_key(layer) is None


def test_a_key_of_plain_tuples_and_a_backend_value_of_another_type_are_named():
    odd = K.QuantKey(torch.int8, K.ScaleDesc(torch.float32, False, (1, 128)))
    with pytest.raises(fq.UnsupportedError, match="unsupported quant key .*\\(1, 128\\)"):
        fq.quantize(torch.randn(2, 128), odd)
    from fused_quant.platforms.info import PlatformInfo  # noqa: F401  (the probe's type)
    from fused_quant.platforms import current_platform
    from fused_quant.selection import select_backend

    with pytest.raises(TypeError, match="select_backend: env must be a backend's name, 'auto' or None, got int 1"):
        select_backend(current_platform(), 1)
    with pytest.raises(fq.BackendUnavailableError, match="FUSED_QUANT_BACKEND='Bogus_X' is not a backend"):
        select_backend(current_platform(), "Bogus_X")


def test_linear_act_quant_runs_a_hooked_activation_even_where_one_kernel_is_bound():
    """Where a layer's GEMM has bound the one-kernel call (GPU only: stood in for here by a call that must not run),
    an activation with a hook makes ``linear_act_quant`` run the two calls, the hook included."""
    up, down = _layer(K.kInt8DynamicTokenSym, k=16, n=32), _layer(K.kFp8StaticTensorSym, k=16, n=8)
    x = torch.randn(3, 16, dtype=torch.bfloat16)

    class OneKernel:
        call = object()  # bound: the fused call would run

        def current(self, consumer):
            return True

        def __call__(self, x):
            raise AssertionError("the one-kernel call ran")

    plain = fq.SiluAndMul()
    for _ in range(2):  # binds the layer's call, then the producer's record
        fq.linear_act_quant(up, x, plain, down)
    (bound,) = up._bound.values()
    bound.producing = {key: OneKernel() for key in bound.producing}
    with pytest.raises(AssertionError, match="the one-kernel call ran"):  # the stand-in is reached unhooked
        fq.linear_act_quant(up, x, plain, down)
    plain.register_forward_hook(lambda m, i, o: o.clamp(-0.01, 0.01))
    got = fq.linear_act_quant(up, x, plain, down)
    assert type(got) is torch.Tensor and torch.equal(got, plain(up(x)))


# --- sparse and nested scales, and arguments of the wrong kind, named where they come in ----------

def _sparse_and_nested(values):
    dense = torch.tensor(values, dtype=torch.float32)
    yield "layout torch.sparse_coo", dense.to_sparse()
    yield "a nested tensor", torch.nested.nested_tensor([dense])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_sparse_and_nested_scales_are_refused_on_every_way_in():
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    layer = _layer(K.kInt8StaticTensorSym)
    w, ws, s = layer.weight, layer.weight_scale.clone(), layer.input_scale.clone()
    for got, scale in _sparse_and_nested([0.05]):
        match = f"input_scale.* must be a dense \\(strided\\) tensor, got {got}"
        with pytest.raises(fq.LayoutError, match=f"scale for int8_static_tensor must be a dense .*got {got}"):
            fq.quantize(x, K.kInt8StaticTensorSym, scale)
        with pytest.raises(fq.LayoutError, match=match):
            fq.QuantLinear(w, ws, K.kInt8StaticTensorSym, input_scale=scale)
        with pytest.raises(fq.LayoutError, match=match):
            layer.input_scale = scale
        if got.startswith("layout"):  # a state dict holds plain or sparse tensors
            with pytest.raises(fq.LayoutError, match=f"the state dict's input_scale must be a dense .*got {got}"):
                layer.load_state_dict({**layer.state_dict(), "input_scale": scale})
    for got, scale in _sparse_and_nested(ws.reshape(-1).tolist()):
        with pytest.raises(fq.LayoutError, match=f"weight_scale must be a dense \\(strided\\) tensor, got {got}"):
            fq.QuantLinear(w, scale, K.kInt8StaticTensorSym, input_scale=0.05)
    with pytest.raises(fq.LayoutError, match="the state dict's weight_scale must be a dense .*sparse_coo"):
        layer.load_state_dict({**layer.state_dict(), "weight_scale": ws.to_sparse()})
    assert torch.equal(layer.weight_scale, ws) and torch.equal(layer.input_scale, s)  # nothing taken in


def test_an_int_past_floats_range_as_a_static_scale_is_named_briefly_on_every_way_in():
    layer = _layer(K.kInt8StaticTensorSym)
    x = torch.randn(2, 16)
    huge = 10 ** 400
    for make in (lambda: fq.QuantLinear(layer.weight, layer.weight_scale, K.kInt8StaticTensorSym, input_scale=huge),
                 lambda: layer.set_input_scale(huge)):
        with pytest.raises(fq.ScaleError, match="input_scale must be finite and >= 1.1754944e-38 in float32, got int "
                                                "1000.*\\.\\.\\.") as caught:
            make()
        assert len(str(caught.value)) < 300
    for call in (lambda: setattr(layer, "input_scale", huge), lambda: fq.quantize(x, K.kInt8StaticTensorSym, huge),
                 lambda: fq.fused_act_quant("relu2", x, K.kInt8StaticTensorSym, huge)):  # these take tensors only
        with pytest.raises(fq.QuantDTypeError, match="must be a one-element float32 torch.Tensor on cpu, got int "
                                                     "\\(1000.*\\.\\.\\..*, past float32's range\\)"):
            call()
    assert float(layer.input_scale) == pytest.approx(0.05)


def test_a_sparse_scale_is_refused_after_a_dense_one_of_its_metadata_bound_the_call():
    x = torch.randn(2, 16)
    dense = torch.tensor([0.05])
    for call in (lambda s: fq.quantize(x, K.kInt8StaticTensorSym, s),
                 lambda s: fq.fused_act_quant("relu2", x, K.kInt8StaticTensorSym, s)):
        call(dense), call(dense)  # checked, then bound
        with pytest.raises(fq.LayoutError, match="must be a dense \\(strided\\) tensor, got layout torch.sparse_coo"):
            call(dense.to_sparse())


def test_a_gemm_providers_functions_that_cannot_take_their_arguments_are_refused_when_registered():
    takes = {"supported": "(problem)", "bind": "(problem, weight, weight_scale, bias)",
             "bind_quantizing": "(problem, weight, weight_scale, bias, quantizer)",
             "bind_producing": "(problem, weight, weight_scale, bias, producer, quantizer=None)"}
    fine = lambda x, xs, w, ws, bias, out_dtype: None  # noqa: E731
    with pytest.raises(TypeError, match="register_gemm_provider\\('bad'\\): the provider must take \\(x, x_scale, "
                                        "weight, weight_scale, bias, out_dtype\\), got .*\\(xq\\)"):
        register_gemm_provider("bad", lambda xq: None, kind="int8", backends=("torch",))
    for what, call in takes.items():
        with pytest.raises(TypeError, match=f"register_gemm_provider\\('bad'\\): {what} must take "
                                            f"{re.escape(call)}, got"):
            register_gemm_provider("bad", fine, kind="int8", backends=("torch",), **{what: lambda: None})
    # bind_producing is called with and without its quantizer: one that needs it, or cannot take it, fails the other
    for needs in (lambda p, w, ws, bias, producer, quantizer: None, lambda p, w, ws, bias, producer: None):
        with pytest.raises(TypeError, match="bind_producing must take \\(problem, weight, weight_scale, bias, "
                                            "producer, quantizer=None\\), got"):
            register_gemm_provider("bad", fine, kind="int8", backends=("torch",), bind_producing=needs)
    with pytest.raises(TypeError, match="first must be True or False, got 'no'"):
        register_gemm_provider("bad", fine, kind="int8", first="no")
    with pytest.raises(fq.BackendUnavailableError, match="unknown backend \\['torch'\\]"):
        register_gemm_provider("bad", fine, kind="int8", backends=[["torch"]])
    with pytest.raises(TypeError, match="unregister_gemm_provider: name must be a provider's name .*\\['x'\\]"):
        unregister_gemm_provider(["x"])
    assert "bad" not in fq.gemm.provider_names()


def test_a_producers_supported_and_replace_are_checked_and_unregister_checks_its_activation():
    fn = lambda x, scale, *, numerics, fp8_dtype: None  # noqa: E731
    with pytest.raises(TypeError, match="register_producer: supported must take \\(x, scale\\), got"):
        fq.register_producer(fq.SiluAndMul, K.kInt8DynamicTokenSym, backend="torch", supported=lambda x: True,
                             replace=True)(fn)
    with pytest.raises(TypeError, match="register_producer: replace must be True or False, got 'no'"):
        fq.register_producer(fq.SiluAndMul, K.kInt8DynamicTokenSym, backend="torch", replace="no")
    for act in ("relu2", fq.SiluAndMul()):
        with pytest.raises(TypeError, match="unregister_producer: act_type must be an activation module class "
                                            f"\\(SiluAndMul, .*got {type(act).__name__}"):
            fq.unregister_producer(act, K.kInt8DynamicTokenSym, backend="torch")


def test_a_numerics_value_naming_no_profile_is_refused_where_nothing_is_fused_too():
    x = torch.randn(3, 16)
    hooked = fq.SiluAndMul()
    hooked.register_forward_hook(lambda m, i, o: o)
    for act, consumer in ((fq.SiluAndMul(), None), (fq.SiluAndMul(), nn.Linear(8, 4)), (nn.GELU(), None),
                          (hooked, _layer(K.kInt8DynamicTokenSym, k=8, n=4))):
        for bad in ("nope", 123):
            with pytest.raises(fq.NumericsProfileError, match=f"unknown numerics profile {bad!r}"):
                fq.maybe_fused_act_quant(act, x, consumer, numerics=bad)
    up = _layer(K.kInt8DynamicTokenSym, k=16, n=16)
    with pytest.raises(fq.NumericsProfileError, match="unknown numerics profile 123"):
        fq.linear_act_quant(up, x.to(torch.bfloat16), fq.SiluAndMul(), None, numerics=123)
    assert torch.equal(fq.maybe_fused_act_quant(nn.GELU(), x, None, numerics="hcu"), nn.GELU()(x))
    for bad in (0, False, []):  # only None and "" leave the profile to FUSED_QUANT_NUMERICS
        with pytest.raises(fq.NumericsProfileError, match="unknown numerics profile"):
            fq.FusedSiluAndMulAndQuant(numerics=bad)


def test_keys_and_consumers_of_the_wrong_kind_are_named():
    with pytest.raises(fq.UnsupportedError, match="unsupported quant key .*\\[1, -1\\]"):
        fq.quantize(torch.randn(2, 16), K.QuantKey(torch.int8, K.ScaleDesc(torch.float32, False, [1, -1])))
    with pytest.raises(TypeError, match="key_name takes a QuantKey, got the string 'int8_dynamic_token' "
                                        "\\(key_from_name\\('int8_dynamic_token'\\) gives its key\\)"):
        K.key_name("int8_dynamic_token")
    with pytest.raises(TypeError, match="got the string 'nope' \\(key names: fp8_static_tensor, "):
        K.key_name("nope")
    with pytest.raises(TypeError, match="as_quantized_activation: expected_key must be a fused_quant QuantKey"):
        as_quantized_activation(torch.randn(2, 4), 3)

    class Kernel:
        input_quant_key = 5

    with pytest.raises(TypeError, match="a kernel's input_quant_key must be a method returning its key or None, "
                                        "got int on Kernel"):
        fq.expose_input_quant_key(nn.Linear(2, 2), Kernel())
    with pytest.raises(TypeError, match="select_backend: info must be a PlatformInfo .*got NoneType"):
        fq.select_backend(None, "auto")


def test_a_lazy_linear_a_names_type_and_a_prefixs_type_are_refused_by_name():
    with pytest.raises(fq.UnsupportedError, match="from_linears: LazyLinear's weight is not initialized yet .*then "
                                                  "from_linears"):
        fq.QuantLinear.from_linears([nn.Linear(4, 4), nn.LazyLinear(4)], K.kInt8DynamicTokenSym)
    layer = _layer(K.kInt8DynamicTokenSym)
    for name in (5, ["a"]):
        with pytest.raises(TypeError, match=f"QuantLinear: name must be a string or None, got "
                                            f"{type(name).__name__}"):
            fq.QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, name=name)
    with pytest.raises(TypeError, match="name_quant_linears: prefix must be a string, got int 3"):
        fq.name_quant_linears(nn.Sequential(layer), prefix=3)


def test_from_linears_names_a_non_finite_weight_in_its_own_linear():
    """Not the merged layer's row: the linear (its given name, or linears[i]) and its own output channel."""
    torch.manual_seed(0)
    gate, up = nn.Linear(16, 8), nn.Linear(16, 8)
    with torch.no_grad():
        up.weight[3, 5] = float("nan")
    with pytest.raises(fq.ScaleError, match="^blk.gate_up: linears\\[1\\]: the float weight has a non-finite value in "
                                            "output channel 3 \\(nan at \\[3, 5\\]; 1 of 8 channels\\)"):
        fq.QuantLinear.from_linears([gate, up], K.kInt8DynamicTokenSym, name="blk.gate_up")
    with pytest.raises(fq.ScaleError, match="^blk.up_proj: the float weight has a non-finite value in output channel 3"):
        fq.QuantLinear.from_linears([gate, up], K.kInt8DynamicTokenSym, names=["blk.gate_proj", "blk.up_proj"])
    for names in (["one"], "ab", [1, 2]):
        with pytest.raises(TypeError, match="from_linears: names must be one string per linear \\(2\\)"):
            fq.QuantLinear.from_linears([gate, up], K.kInt8DynamicTokenSym, names=names)


def test_from_float_copies_the_bias_as_it_copies_the_weight():
    """The quantized layer never shares the float linear's memory: its bias was the linear's own tensor, so an
    in-place change of the float layer (a load, an init) moved the quantized layer's outputs unchecked."""
    lin = nn.Linear(32, 16).to(torch.bfloat16)
    for key in (K.kInt8DynamicTokenSym, K.kFp8StaticTensorSym):
        layer = fq.QuantLinear.from_float(lin, key, 0.05 if K.is_static(key) else None)
        x = torch.randn(3, 32, dtype=torch.bfloat16)
        want = layer(x)
        assert layer.bias.data_ptr() != lin.bias.data_ptr()
        with torch.no_grad():
            lin.bias.fill_(float("inf"))
            lin.weight.zero_()
        assert torch.equal(layer(x), want)
        lin = nn.Linear(32, 16).to(torch.bfloat16)


def _saved_and_loaded(module):
    import io

    buf = io.BytesIO()
    torch.save(module, buf)  # pickles the module (torch's own pickling refuses FP8 storages)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("copy_of", ["deepcopy", "torch.save"])
def test_a_copied_layer_holds_the_packages_key(copy_of):
    """A key copied or unpickled is the package's object again (it was an equal new one: code comparing keys by
    identity refused two layers of one scheme, and calls lost the fast name lookup)."""
    import copy

    for key in K.KEYS.values():
        layer = fq.QuantLinear.from_float(nn.Linear(16, 8), key, 0.1 if K.is_static(key) else None)
        again = copy.deepcopy(layer) if copy_of == "deepcopy" else _saved_and_loaded(layer)
        assert again.input_key is key
        x = torch.randn(2, 16)
        assert torch.equal(again(x), layer(x))
    other = K.QuantKey(torch.int8, K.ScaleDesc(torch.float32, False, K.GroupShape.PER_TENSOR), symmetric=False)
    assert copy.deepcopy(other) == other  # a key of no name is copied as the dataclass it is


def test_fused_silu_and_mul_and_quant_refuses_torchscript_by_name():
    """As QuantLinear: a trace records no Triton launch (on a GPU the traced module would return memory no kernel
    wrote), and script failed deep in torch (import statements)."""
    module = fq.FusedSiluAndMulAndQuant()
    with pytest.raises(fq.UnsupportedError, match="FusedSiluAndMulAndQuant: torch.jit.script; TorchScript cannot "
                                                  "hold fused-quant's modules"):
        torch.jit.script(module)
    with pytest.raises(fq.UnsupportedError, match="FusedSiluAndMulAndQuant: called under torch.jit.trace"):
        torch.jit.trace(module, torch.randn(2, 8))
    with pytest.raises(TypeError, match=r"FusedSiluAndMulAndQuant: quant_dtype must be a torch.dtype \(torch.int8 "
                                        r"or this node's FP8 dtype .*\), got str 'int8'$"):
        module(torch.randn(2, 8), quant_dtype="int8")  # was "must be torch.int8 ..., got int8"
    assert repr(fq.FusedSiluAndMulAndQuant("hcu")) == "FusedSiluAndMulAndQuant(numerics='hcu')"
    assert repr(module) == "FusedSiluAndMulAndQuant(numerics=FUSED_QUANT_NUMERICS)"


def test_a_default_name_follows_the_weight_and_the_repr_says_the_output_dtype():
    layer = fq.QuantLinear.from_float(nn.Linear(32, 16), K.kInt8DynamicTokenSym)
    assert layer.name == "QuantLinear(in_features=32, out_features=16)" and "out_dtype=torch.float32" in repr(layer)
    layer.weight = torch.randint(-127, 128, (8, 64), dtype=torch.int8)  # another shape: errors say this one
    assert layer.name == "QuantLinear(in_features=64, out_features=8)"
    layer.name = "blk.0.up"
    layer.weight = torch.randint(-127, 128, (4, 64), dtype=torch.int8)
    assert layer.name == "blk.0.up"  # a name given stays
    layer.out_dtype = torch.bfloat16
    assert "out_dtype=torch.bfloat16" in repr(layer)


def test_a_key_of_another_fp8_format_is_copied_as_itself():
    """An e4m3fnuz key (vLLM's ROCm keys, read by value) names as the FP8 key but is not it: copied or pickled it
    stays itself (it became the e4m3fn key)."""
    import copy
    import pickle

    fnuz = K.QuantKey(torch.float8_e4m3fnuz, fq.kFp8DynamicTokenSym.scale)
    for again in (copy.copy(fnuz), copy.deepcopy(fnuz), pickle.loads(pickle.dumps(fnuz))):
        assert again == fnuz and again.dtype == torch.float8_e4m3fnuz


def test_no_name_is_the_default_name_and_a_name_is_a_string():
    layer = fq.QuantLinear.from_float(nn.Linear(32, 16), K.kInt8DynamicTokenSym, name="")
    assert layer.name == "QuantLinear(in_features=32, out_features=16)"
    layer.weight = torch.randint(-127, 128, (8, 64), dtype=torch.int8)
    assert layer.name == "QuantLinear(in_features=64, out_features=8)"  # "" was no name: it follows the weight
    layer.name = "blk.0.up"
    layer.name = None
    assert layer.name == "QuantLinear(in_features=64, out_features=8)"
    with pytest.raises(TypeError, match="name must be a string or None, got int 5"):
        layer.name = 5
    with pytest.raises(TypeError, match=r"name must be a string or None, got Tensor of shape \[64, 64\]$"):
        layer.name = torch.zeros(64, 64)  # its type and shape, not its values
    assert layer.name == "QuantLinear(in_features=64, out_features=8)"
