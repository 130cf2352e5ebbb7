"""Producer registry: ``maybe_fused_act_quant``'s decisions (fuse with the consumer's key, or fall back).

Every fused result is compared bitwise with ``act_quant_ref``; every fallback with the plain
activation (split from test_registry.py; shared helpers in tests/registry_fixtures.py).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant.contract import expose_input_quant_key, get_input_quant_key
from fused_quant.modules import QuantLinear, ReLUSquared, SiluAndMul
from fused_quant.registry import (
    fusion_counts,
    maybe_fused_act_quant,
    reset_fusion_counts,
)
from fused_quant.validation import (
    QuantDTypeError,
    ShapeMismatchError,
)
from tests.registry_fixtures import ACT_MODULES, _assert_plain, _assert_qa_is_ref, _input

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]


# --- maybe_fused_act_quant --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32), ids=str)
@pytest.mark.parametrize("key_name", list(K.KEYS))
@pytest.mark.parametrize("act", list(ACT_MODULES))
def test_maybe_fused_with_a_quant_linear(act, key_name, dtype):
    key = K.KEYS[key_name]
    k = 32
    layer = QuantLinear.from_float(nn.Linear(k, 8), key, input_scale=0.043 if K.is_static(key) else None)
    # rank 3 input; width 2k for silu_and_mul, whose output is the layer's K
    x = _input(act, dtype, shape=(2, 3, 2 * k if act == "silu_and_mul" else k))
    qa = maybe_fused_act_quant(ACT_MODULES[act](), x, layer)
    _assert_qa_is_ref(qa, act, x, key, layer.input_scale)
    assert qa.data.shape == (2, 3, k)
    # and the layer consumes it
    assert layer(qa).shape == (2, 3, 8)


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_maybe_fused_with_a_plain_module_exposing_a_key(key_name):
    key = K.KEYS[key_name]
    linear = nn.Linear(32, 8)
    expose_input_quant_key(linear, key)
    if K.is_static(key):
        linear.input_scale = torch.tensor([0.043])
    x = _input("silu_and_mul")
    _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, linear), "silu_and_mul", x, key,
                      getattr(linear, "input_scale", None))


def test_expose_with_a_kernel_object():
    class Kernel:
        def __init__(self, key):
            self.key = key

        def input_quant_key(self):
            return self.key

    linear = nn.Linear(4, 4)
    expose_input_quant_key(linear, Kernel(None))  # quantizes its own input: nothing exposed
    assert get_input_quant_key(linear) is None
    expose_input_quant_key(linear, Kernel(K.kFp8DynamicTokenSym))
    assert get_input_quant_key(linear) == K.kFp8DynamicTokenSym
    expose_input_quant_key(linear, "fp8_dynamic_token")  # a key name
    assert get_input_quant_key(linear) is K.kFp8DynamicTokenSym
    with pytest.raises(TypeError, match="must be a fused_quant QuantKey, a key name .* got builtins.int"):
        expose_input_quant_key(linear, 3)


def test_maybe_fused_falls_back_to_the_plain_activation():
    x = _input("silu_and_mul")
    reset_fusion_counts()
    # a linear that exposes no key, and no linear at all
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, nn.Linear(32, 8)), SiluAndMul(), x)
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, None), SiluAndMul(), x)
    # LoRA-like opt-out on a layer that does expose a key
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    layer.requires_unquantized_input = True
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    # an activation no producer knows
    gelu_layer = QuantLinear.from_float(nn.Linear(64, 8), K.kInt8DynamicTokenSym)
    _assert_plain(maybe_fused_act_quant(nn.GELU(), x, gelu_layer), nn.GELU(), x)
    assert fusion_counts() == {}


@pytest.mark.parametrize("problem", ["missing", "none", "float", "float64", "two_elements", "other_device"])
@pytest.mark.parametrize("key_name", list(k for k, v in K.KEYS.items() if K.is_static(v)))
def test_maybe_fused_static_key_with_unusable_scale_attribute_falls_back(key_name, problem):
    linear = nn.Linear(32, 8)
    expose_input_quant_key(linear, K.KEYS[key_name])
    scale = {"missing": None, "none": None, "float": 0.5, "float64": torch.tensor([0.5], dtype=torch.float64),
             "two_elements": torch.tensor([0.5, 0.5]), "other_device": torch.tensor([0.5], device="meta")}[problem]
    if problem != "missing":
        linear.input_scale = scale
    x = _input("silu_and_mul")
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, linear), SiluAndMul(), x)


def test_maybe_fused_static_scale_value_is_not_checked_per_call():
    """Values are checked when set on a layer; a raw module's NaN scale is used as-is (per spec)."""
    linear = nn.Linear(32, 8)
    expose_input_quant_key(linear, K.kFp8StaticTensorSym)
    linear.input_scale = torch.tensor([float("nan")])
    x = _input("silu_and_mul")
    _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, linear), "silu_and_mul", x, K.kFp8StaticTensorSym,
                      linear.input_scale)


def test_maybe_fused_malformed_input_raises():
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    with pytest.raises(QuantDTypeError, match="got torch.int32"):
        maybe_fused_act_quant(SiluAndMul(), torch.ones(4, 64, dtype=torch.int32), layer)
    with pytest.raises(QuantDTypeError, match="got torch.float8_e4m3fn"):
        maybe_fused_act_quant(ReLUSquared(), torch.ones(4, 32).to(torch.float8_e4m3fn), layer)
    with pytest.raises(ShapeMismatchError, match="must be even; got 63"):
        maybe_fused_act_quant(SiluAndMul(), torch.ones(4, 63), layer)


@pytest.mark.parametrize("how", ["argument", "env"])
def test_maybe_fused_numerics_profile(how, monkeypatch):
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    x = _input("silu_and_mul")
    if how == "env":
        monkeypatch.setenv("FUSED_QUANT_NUMERICS", "hcu")
        qa = maybe_fused_act_quant(SiluAndMul(), x, layer)
    else:
        qa = maybe_fused_act_quant(SiluAndMul(), x, layer, numerics="hcu")
    _assert_qa_is_ref(qa, "silu_and_mul", x, K.kInt8DynamicTokenSym, None, numerics="hcu")
    default = maybe_fused_act_quant(SiluAndMul(), x, layer, numerics="default")
    assert not torch.equal(default.data, qa.data)  # the profiles differ on this input


def test_every_reader_of_the_numerics_variable_reads_it_once_per_runtime_state(monkeypatch):
    """maybe_fused_act_quant and FusedSiluAndMulAndQuant take FUSED_QUANT_NUMERICS as the runtime state read it: a
    change (a bad value here) counts from the next reset() on, for both alike (the module read it every call)."""
    import fused_quant
    from fused_quant import FusedSiluAndMulAndQuant, NumericsProfileError

    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    x, module = _input("silu_and_mul"), FusedSiluAndMulAndQuant()
    maybe_fused_act_quant(SiluAndMul(), x, layer)
    module(x)
    monkeypatch.setenv("FUSED_QUANT_NUMERICS", "bogus")
    maybe_fused_act_quant(SiluAndMul(), x, layer)
    module(x)
    fused_quant.reset()
    for call in (lambda: maybe_fused_act_quant(SiluAndMul(), x, layer), lambda: module(x)):
        with pytest.raises(NumericsProfileError, match="FUSED_QUANT_NUMERICS='bogus'"):
            call()
    monkeypatch.delenv("FUSED_QUANT_NUMERICS")
    fused_quant.reset()


def test_maybe_fused_with_a_key_no_producer_handles_falls_back():
    # vLLM's kFp8Dynamic128Sym: FP8, dynamic, group (1, 128). A vLLM linear may expose it; model code
    # calls maybe_fused_act_quant unconditionally, so the contract's "otherwise act_fn(x)" applies.
    group_key = K.QuantKey(K.FP8_DTYPE, K.ScaleDesc(torch.float32, False, K.GroupShape(1, 128)))
    linear = nn.Linear(32, 8)
    expose_input_quant_key(linear, group_key)
    x = _input("silu_and_mul")
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, linear), SiluAndMul(), x)
