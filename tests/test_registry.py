"""Producer registry: registration, lookup, fusion counts and ``fused_act_quant``.

Every fused result is compared bitwise with ``act_quant_ref``; every fallback with the plain
activation. Test producers go into a patched copy of the registry table, so nothing leaks.
``maybe_fused_act_quant``'s decisions are in test_registry_maybe_fused.py, validated call
signatures in test_registry_signatures.py; shared helpers in tests/registry_fixtures.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant import runtime
from fused_quant import registry
from fused_quant.contract import QuantizedActivation
from fused_quant.modules import QuantLinear, ReLUSquared, SiluAndMul
from fused_quant.reference import act_quant_ref
from fused_quant.registry import (
    fused_act_quant,
    fusion_counts,
    lookup,
    maybe_fused_act_quant,
    producers,
    quantize,
    register_producer,
    reset_fusion_counts,
)
from fused_quant.validation import BackendUnavailableError
from tests.registry_fixtures import (  # noqa: F401  (fake_backend: a fixture)
    ACT_MODULES,
    TEST_BACKEND,
    _assert_plain,
    _assert_qa_is_ref,
    _input,
    fake_backend,
)

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]


def _scale(key):
    return torch.tensor([0.043], dtype=torch.float32) if K.is_static(key) else None


# --- the table --------------------------------------------------------------------------------


def test_every_backend_registers_every_activation_and_key():
    """Registration never depends on the probe: GPU backends' producers exist on a CPU node too."""
    want = {(act, name) for act in ACT_MODULES for name in K.KEYS}
    for backend in ("torch", "triton_fp8", "hip_w8a8"):
        got = [(p.act, K.key_name(p.key)) for p in producers(backend)]
        assert sorted(got) == sorted(want), backend
        for p in producers(backend):
            assert p.backend == backend and p.act_type is ACT_MODULES[p.act]
    assert {p.backend for p in producers()} >= {"torch", "triton_fp8", "hip_w8a8"}
    assert len(producers()) == sum(len(producers(b)) for b in registry._PRODUCERS)


def test_lookup():
    p = lookup(SiluAndMul, K.kInt8DynamicTokenSym, "torch")
    assert p is not None and p.act == "silu_and_mul" and p.key == K.kInt8DynamicTokenSym

    class MySilu(SiluAndMul):  # a model's own subclass is still a silu_and_mul
        pass

    assert lookup(MySilu, K.kInt8DynamicTokenSym, "torch") is p
    fnuz_key = K.QuantKey(torch.float8_e4m3fnuz, K.kDynamicTokenScale)
    assert lookup(ReLUSquared, fnuz_key, "torch") is lookup(ReLUSquared, K.kFp8DynamicTokenSym, "torch")
    assert lookup(nn.GELU, K.kInt8DynamicTokenSym, "torch") is None
    assert lookup(SiluAndMul, K.kInt8DynamicTokenSym, "no_such_backend") is None


def test_register_producer(fake_backend):
    calls = []

    def produce(x, scale, *, numerics, fp8_dtype):
        calls.append((tuple(x.shape), numerics.name, fp8_dtype))
        return act_quant_ref("relu2", x, K.kInt8DynamicTokenSym, scale, numerics=numerics, fp8_dtype=fp8_dtype)

    returned = register_producer(ReLUSquared, K.kInt8DynamicTokenSym, backend=fake_backend)(produce)
    assert returned is produce  # a decorator that leaves the function usable
    p = lookup(ReLUSquared, K.kInt8DynamicTokenSym, fake_backend)
    assert p.fn is produce and p.backend == fake_backend and p.act == "relu2" and p.supported is None
    assert [q.fn for q in producers(fake_backend)] == [produce]

    layer = QuantLinear.from_float(nn.Linear(64, 8), K.kInt8DynamicTokenSym)
    x = _input("relu2")
    _assert_qa_is_ref(maybe_fused_act_quant(ReLUSquared(), x, layer), "relu2", x, K.kInt8DynamicTokenSym, None)
    _assert_qa_is_ref(fused_act_quant("relu2", x, K.kInt8DynamicTokenSym, numerics="hcu"),
                      "relu2", x, K.kInt8DynamicTokenSym, None, numerics="hcu")
    assert calls == [((16, 64), "default", registry.platform_fp8_dtype()),
                     ((16, 64), "hcu", registry.platform_fp8_dtype())]
    # no producer for silu_and_mul on this backend: the torch backend computes it, in either form
    _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, layer), "silu_and_mul", x, K.kInt8DynamicTokenSym, None)
    _assert_qa_is_ref(fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym), "silu_and_mul", x,
                      K.kInt8DynamicTokenSym, None)
    assert len(calls) == 2


def test_register_producer_rejects_unknown_activation_and_key(fake_backend):
    with pytest.raises(ValueError, match="GELU is not a known activation"):
        register_producer(nn.GELU, K.kInt8DynamicTokenSym, backend=TEST_BACKEND)(lambda *a, **k: None)
    bad_key = K.QuantKey(torch.int8, K.kDynamicTokenScale, symmetric=False)
    with pytest.raises(ValueError, match="unsupported quant key"):
        register_producer(SiluAndMul, bad_key, backend=TEST_BACKEND)
    assert not producers(TEST_BACKEND)


def test_support_predicate_declines_and_the_input_falls_back(fake_backend):
    seen = []

    def supported(x, scale):
        seen.append(scale)
        return (x.shape[-1] % 128 == 0), "only multiples of 128"

    def produce(x, scale, *, numerics, fp8_dtype):
        raise AssertionError("declined input reached the producer")

    register_producer(SiluAndMul, K.kFp8StaticTensorSym, backend=fake_backend, supported=supported)(produce)
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kFp8StaticTensorSym, input_scale=0.02)
    x = _input("silu_and_mul")  # width 64: declined, and the torch backend computes the same bits instead
    _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, layer), "silu_and_mul", x, K.kFp8StaticTensorSym,
                      layer.input_scale)
    assert seen == [layer.input_scale]  # the predicate saw the layer's static scale
    # as does the functional form
    scale = torch.tensor([0.02])
    _assert_qa_is_ref(fused_act_quant(SiluAndMul(), x, K.kFp8StaticTensorSym, scale),
                      "silu_and_mul", x, K.kFp8StaticTensorSym, scale)
    # ... but a named backend never falls back
    with pytest.raises(BackendUnavailableError, match="only multiples of 128"):
        fused_act_quant(SiluAndMul(), x, K.kFp8StaticTensorSym, scale, backend=fake_backend)


def test_input_every_producer_declines_runs_plain(fake_backend, monkeypatch):
    """Where the current backend's producer and the torch backend's both decline an input, maybe_fused returns
    the plain activation and fused_act_quant names both reasons."""
    register_producer(SiluAndMul, K.kInt8DynamicTokenSym, backend=fake_backend,
                      supported=lambda x, s: (False, "ours declines"))(lambda *a, **k: None)
    torch_prod = registry._lookup_names("silu_and_mul", "int8_dynamic_token", "torch")
    monkeypatch.setitem(registry._PRODUCERS, "torch", {**registry._PRODUCERS["torch"], (
        "silu_and_mul", "int8_dynamic_token"): torch_prod._replace(supported=lambda x, s: (False, "torch declines"))})
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    x = _input("silu_and_mul")
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    with pytest.raises(BackendUnavailableError, match="ours declines; torch: torch declines"):
        fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym)


def test_a_decline_by_values_is_asked_again_at_the_next_call(fake_backend):
    """A producer without ``bind`` may decline by an input's values: the torch backend's call that ran instead is
    not filed under the input's signature, so the next input with the same metadata is asked again (both forms)."""
    asked = []

    def supported(x, scale):
        asked.append(1)
        return bool(x[0, 0] >= 0), "a negative first value"

    def produce(x, scale, *, numerics, fp8_dtype):
        return act_quant_ref("silu_and_mul", x, K.kInt8DynamicTokenSym, scale, numerics=numerics, fp8_dtype=fp8_dtype)

    register_producer(SiluAndMul, K.kInt8DynamicTokenSym, backend=fake_backend, supported=supported)(produce)
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    x = _input("silu_and_mul")
    declined, accepted = x.clone(), x.clone()
    declined[0, 0], accepted[0, 0] = -1.0, 1.0
    for call in (lambda t: maybe_fused_act_quant(SiluAndMul(), t, layer),
                 lambda t: fused_act_quant("silu_and_mul", t, K.kInt8DynamicTokenSym)):
        reset_fusion_counts()
        _assert_qa_is_ref(call(declined), "silu_and_mul", declined, K.kInt8DynamicTokenSym, None)
        _assert_qa_is_ref(call(accepted), "silu_and_mul", accepted, K.kInt8DynamicTokenSym, None)
        assert fusion_counts() == {("torch", "silu_and_mul", "int8_dynamic_token"): 1,
                                   (fake_backend, "silu_and_mul", "int8_dynamic_token"): 1}
    assert len(asked) == 4


def test_gpu_backend_on_cpu_tensors_falls_back(monkeypatch):
    """The triton_fp8 producers decline CPU tensors (a CPU model on a GPU node): maybe_fused and
    fused_act_quant compute the same bits with the torch backend (counted as torch). maybe_fused returned the
    plain activation, which torch.compile fused with its own rounding (tests/test_compile.py)."""
    monkeypatch.setattr(registry, "current_backend_name", lambda: "triton_fp8")
    monkeypatch.setattr(registry, "_CALLS", runtime.Cache("calls"))
    reset_fusion_counts()
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    x = _input("silu_and_mul")
    _assert_qa_is_ref(maybe_fused_act_quant(SiluAndMul(), x, layer), "silu_and_mul", x, K.kInt8DynamicTokenSym, None)
    _assert_qa_is_ref(fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym), "silu_and_mul", x,
                      K.kInt8DynamicTokenSym, None)
    assert fusion_counts() == {("torch", "silu_and_mul", "int8_dynamic_token"): 2}
    with pytest.raises(BackendUnavailableError, match="Triton kernels run on GPU tensors; input is on cpu"):
        fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym, backend="triton_fp8")


# --- fusion counts ----------------------------------------------------------------------------


def test_fusion_counts():
    reset_fusion_counts()
    assert fusion_counts() == {}
    x = _input("silu_and_mul")
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kFp8DynamicTokenSym)
    for _ in range(3):
        maybe_fused_act_quant(SiluAndMul(), x, layer)
    fused_act_quant("relu2", x, K.kInt8StaticTensorSym, torch.tensor([0.1]))
    maybe_fused_act_quant(SiluAndMul(), x, nn.Linear(32, 8))  # fallback: not counted
    counts = fusion_counts()
    assert counts == {("torch", "silu_and_mul", "fp8_dynamic_token"): 3,
                      ("torch", "relu2", "int8_static_tensor"): 1}
    counts.clear()  # a copy: clearing it does not reset the counters
    assert sum(fusion_counts().values()) == 4
    reset_fusion_counts()
    assert fusion_counts() == {}


# --- fused_act_quant --------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ("default", "hcu"))
@pytest.mark.parametrize("key_name", list(K.KEYS))
@pytest.mark.parametrize("act", list(ACT_MODULES))
def test_fused_act_quant_by_name_and_by_module(act, key_name, profile):
    key = K.KEYS[key_name]
    x = _input(act, shape=(5, 66))  # 66: silu_and_mul's half (33) is odd
    scale = _scale(key)
    by_name = fused_act_quant(act, x, key, scale, numerics=profile)
    by_module = fused_act_quant(ACT_MODULES[act](), x, key, scale, numerics=profile)
    explicit = fused_act_quant(act, x, key, scale, numerics=profile, backend="torch")
    for qa in (by_name, by_module, explicit):
        _assert_qa_is_ref(qa, act, x, key, scale, numerics=profile)


def test_fused_act_quant_m0_and_rank1():
    # M = 0 (empty output, scale [0, 1]) and rank 1 (scale [1]): shapes restored
    for shape in ((0, 16), (4, 0, 16), (16,)):
        x = torch.randn(shape, dtype=torch.bfloat16)
        qa = fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym)
        _assert_qa_is_ref(qa, "silu_and_mul", x, K.kInt8DynamicTokenSym, None)
        assert qa.data.shape == (*shape[:-1], 8) and qa.scale.shape == (*shape[:-1], 1)


def test_quantize_is_the_identity_producer():
    x = _input("identity")
    for key in K.KEYS.values():
        scale = _scale(key)
        _assert_qa_is_ref(quantize(x, key, scale), "identity", x, key, scale)


@pytest.mark.parametrize("act", list(ACT_MODULES))
def test_producer_output_is_contiguous_for_a_permuted_input(act):
    """Every consumer GEMM needs row-major data, so a producer must give it for any valid input."""
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    width = 64 if act == "silu_and_mul" else 32
    x = _input(act, shape=(7, 2, width)).transpose(0, 1)  # seq-first viewed batch-first: [2, 7, width]
    qa = maybe_fused_act_quant(ACT_MODULES[act](), x, layer)
    _assert_qa_is_ref(qa, act, x, K.kInt8DynamicTokenSym, None)  # the values are right...
    assert qa.data.is_contiguous(), f"data strides {qa.data.stride()}"  # ...and so is the layout
    assert layer(qa).shape == (2, 7, 8)


class ClampedSiluAndMul(SiluAndMul):
    """A model's own SwiGLU variant (clamped gate and up, as GPT-OSS does): a SiluAndMul subclass
    whose forward is not silu_and_mul."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return torch.nn.functional.silu(x[..., :d].clamp(max=7.0)) * x[..., d:].clamp(-7.0, 7.0)


def test_subclass_overriding_forward_is_not_fused_with_the_parent_math():
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    act = ClampedSiluAndMul()
    x = (torch.randn(16, 64, generator=torch.Generator().manual_seed(3)) * 20).to(torch.bfloat16)
    y = maybe_fused_act_quant(act, x, layer)
    want = act(x)
    if isinstance(y, QuantizedActivation):  # fusing is fine only if it computes the subclass's forward
        q, s = act_quant_ref("identity", want, K.kInt8DynamicTokenSym)
        assert torch.equal(y.data, q) and torch.equal(y.scale, s), "fused with silu_and_mul, not the subclass"
    else:
        _assert_plain(y, act, x)
