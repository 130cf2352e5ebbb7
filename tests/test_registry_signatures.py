"""Producer registry: validated calls, a producer bound once per call signature.

A call's metadata is checked once and its bound producer runs on later calls of the same
signature; every result is still compared bitwise with ``act_quant_ref`` (split from
test_registry.py; shared helpers in tests/registry_fixtures.py).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant import runtime
from fused_quant import registry
from fused_quant.modules import QuantLinear, ReLUSquared, SiluAndMul
from fused_quant.reference import act_quant_ref
from fused_quant.registry import (
    fused_act_quant,
    fusion_counts,
    maybe_fused_act_quant,
    register_producer,
    reset_fusion_counts,
)
from fused_quant.contract import expose_input_quant_key
from fused_quant.validation import (
    NumericsProfileError,
    QuantDTypeError,
    ScaleError,
    ShapeMismatchError,
)
from tests.registry_fixtures import (  # noqa: F401  (fake_backend: a fixture)
    TEST_BACKEND,
    _assert_plain,
    _assert_qa_is_ref,
    _input,
    fake_backend,
)

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]


# --- validated calls: a producer bound per call signature --------------------------------------


class _BindingProducer:
    """A producer with ``bind``: records each bind and each bound call; computes the reference."""

    def __init__(self, act: str, key: K.QuantKey):
        self.act, self.key, self.binds, self.calls = act, key, [], 0

    def fn(self, x, scale, *, numerics, fp8_dtype):
        q, s = act_quant_ref(self.act, x, self.key, scale, numerics=numerics, fp8_dtype=fp8_dtype)
        return q.contiguous(), s  # (the reference keeps a transposed input's layout; a GEMM takes rows)

    def bind(self, x, scale, *, numerics, fp8_dtype):
        self.binds.append((tuple(x.shape), x.dtype, x.stride(), numerics.name))

        def bound(x2, scale2):
            self.calls += 1
            return self.fn(x2, scale2, numerics=numerics, fp8_dtype=fp8_dtype)
        return bound


@pytest.fixture
def binding(fake_backend, monkeypatch):
    """(producers by (act, key name), number of input checks run) on the fake backend."""
    made = {}
    for act, act_type in (("relu2", ReLUSquared), ("silu_and_mul", SiluAndMul)):
        for name in ("fp8_static_tensor", "int8_dynamic_token"):
            p = made[(act, name)] = _BindingProducer(act, K.KEYS[name])
            register_producer(act_type, K.KEYS[name], backend=fake_backend, bind=p.bind)(p.fn)
    checks = []
    real = registry.check_activation_input
    monkeypatch.setattr(registry, "check_activation_input", lambda x, act: (checks.append(act), real(x, act)))
    return made, checks


def test_a_call_signature_is_checked_once_then_runs_its_bound_producer(binding):
    made, checks = binding
    p = made[("relu2", "fp8_static_tensor")]
    key, scale = K.kFp8StaticTensorSym, torch.tensor([0.043])
    reset_fusion_counts()
    for seed in range(3):  # new values, same metadata: one check, one bind, every call computed anew
        x = _input("relu2", seed=seed)
        _assert_qa_is_ref(fused_act_quant("relu2", x, key, scale), "relu2", x, key, scale)
    assert (len(checks), len(p.binds), p.calls) == (1, 1, 3)
    assert fusion_counts() == {(TEST_BACKEND, "relu2", "fp8_static_tensor"): 3}
    # any change of metadata is a new signature: checked and bound again
    variants = [_input("relu2", shape=(8, 64)), _input("relu2", dtype=torch.float16),
                _input("relu2", shape=(64, 16)).t(), _input("relu2", shape=(2, 8, 64))]
    for x in variants:
        _assert_qa_is_ref(fused_act_quant("relu2", x, key, scale), "relu2", x, key, scale)
    _assert_qa_is_ref(fused_act_quant(ReLUSquared(), x, key, scale), "relu2", x, key, scale)  # by module
    x = variants[-1]
    _assert_qa_is_ref(fused_act_quant("relu2", x, key, scale, numerics="hcu"), "relu2", x, key, scale, "hcu")
    assert len(checks) == len(p.binds) == 7 and p.binds[-1][3] == "hcu"


def test_bad_input_raises_after_good_calls_of_the_same_shape(binding):
    made, checks = binding
    key, x = K.kFp8StaticTensorSym, _input("silu_and_mul")
    fused_act_quant("silu_and_mul", x, key, torch.tensor([0.043]))
    fused_act_quant("silu_and_mul", x, key, torch.tensor([0.5]))
    assert len(checks) == 1
    with pytest.raises(QuantDTypeError, match="float32"):
        fused_act_quant("silu_and_mul", x, key, torch.tensor([0.043], dtype=torch.float64))
    with pytest.raises(ScaleError, match="exactly 1 element"):
        fused_act_quant("silu_and_mul", x, key, torch.tensor([0.043, 0.1]))
    with pytest.raises(ScaleError, match="per token"):
        fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym, torch.tensor([0.043]))
    with pytest.raises(TypeError, match="one-element float32 torch.Tensor"):
        fused_act_quant("silu_and_mul", x, key, 0.043)
    with pytest.raises(NumericsProfileError, match="unknown numerics profile"):
        fused_act_quant("silu_and_mul", x, key, torch.tensor([0.043]), numerics=["default"])  # unhashable
    with pytest.raises(ShapeMismatchError, match="must be even"):
        fused_act_quant("silu_and_mul", x[:, :63], key, torch.tensor([0.043]))
    assert made[("silu_and_mul", "fp8_static_tensor")].calls == 2


def test_maybe_fused_rereads_the_layer_on_every_call(binding):
    """The layer's key, static scale and LoRA flag are read per call; only the checks are skipped."""
    made, checks = binding
    x = _input("silu_and_mul")
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    for _ in range(2):
        _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, layer), "silu_and_mul", x,
                          K.kInt8DynamicTokenSym, None)
    assert made[("silu_and_mul", "int8_dynamic_token")].calls == 2 and len(checks) == 1
    layer.requires_unquantized_input = True
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    layer.requires_unquantized_input = False
    static = QuantLinear.from_float(nn.Linear(32, 8), K.kFp8StaticTensorSym, input_scale=torch.tensor([0.043]))
    _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, static), "silu_and_mul", x, K.kFp8StaticTensorSym,
                      static.input_scale)
    expose_input_quant_key(layer, K.kFp8StaticTensorSym)  # no input_scale on this layer: plain activation
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    assert made[("silu_and_mul", "int8_dynamic_token")].calls == 2


def test_an_equal_key_object_is_pinned_by_its_signature(binding):
    """Signatures hold a key by identity; the cached call keeps the caller's key object alive, so its
    id cannot be taken by another key while the signature is cached."""
    import dataclasses
    import gc
    import weakref

    made, _ = binding
    x = _input("relu2")
    copy = dataclasses.replace(K.kInt8DynamicTokenSym)
    assert copy is not K.kInt8DynamicTokenSym
    _assert_qa_is_ref(fused_act_quant("relu2", x, copy), "relu2", x, K.kInt8DynamicTokenSym, None)
    alive = weakref.ref(copy)
    del copy
    gc.collect()
    assert alive() is not None
    runtime.reset()
    gc.collect()
    assert alive() is None


def test_producers_or_backend_changing_forget_the_signatures(binding, fake_backend):
    from fused_quant.selection import reset_current_backend

    x = _input("relu2")
    fused_act_quant("relu2", x, K.kInt8DynamicTokenSym)
    assert registry._CALLS
    reset_current_backend()
    assert not registry._CALLS
    fused_act_quant("relu2", x, K.kInt8DynamicTokenSym)
    assert registry._CALLS
    register_producer(ReLUSquared, K.kInt8StaticTensorSym, backend=fake_backend, replace=True)(lambda *a, **k: None)
    assert not registry._CALLS


def test_no_signature_under_the_compiler(binding, monkeypatch):
    """Under torch.compile every call runs the checks (Dynamo traces them) and the producer itself."""
    made, checks = binding
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    x = _input("relu2")
    for _ in range(2):
        _assert_qa_is_ref(fused_act_quant("relu2", x, K.kInt8DynamicTokenSym), "relu2", x,
                          K.kInt8DynamicTokenSym, None)
    assert len(checks) == 2 and not made[("relu2", "int8_dynamic_token")].binds and not registry._CALLS


def test_a_str_subclass_activation_is_checked_every_call(binding):
    """Only an exact ``str`` is a signature's activation (a subclass may hash or compare otherwise):
    one is checked on every call, and a name that is no activation still raises."""
    made, checks = binding

    class Name(str):
        pass

    x = _input("relu2")
    for _ in range(2):
        _assert_qa_is_ref(fused_act_quant(Name("relu2"), x, K.kInt8DynamicTokenSym), "relu2", x,
                          K.kInt8DynamicTokenSym, None)
    assert len(checks) == 2 and not registry._CALLS
    with pytest.raises(registry.UnsupportedError, match="unknown activation 'gelu'"):
        fused_act_quant(Name("gelu"), x, K.kInt8DynamicTokenSym)


def test_a_call_checked_before_a_clear_is_not_filed_after_it(binding, fake_backend):
    """A producer registered (or the backend reset) by another thread while a call is being checked
    and bound: that call runs, but its signature is not filed under the new table."""
    made, checks = binding
    p = made[("relu2", "int8_dynamic_token")]
    real_bind = p.bind

    def bind_during_a_clear(*args, **kwargs):
        runtime.reset()
        return real_bind(*args, **kwargs)

    register_producer(ReLUSquared, K.kInt8DynamicTokenSym, backend=fake_backend, bind=bind_during_a_clear,
                      replace=True)(p.fn)
    x = _input("relu2")
    _assert_qa_is_ref(fused_act_quant("relu2", x, K.kInt8DynamicTokenSym), "relu2", x, K.kInt8DynamicTokenSym, None)
    assert not registry._CALLS and p.calls == 1
    fused_act_quant("relu2", x, K.kInt8DynamicTokenSym)
    assert len(checks) == 2
