"""Producer registry: registration, lookup, ``maybe_fused_act_quant``'s decisions, fusion counts.

Every fused result is compared bitwise with ``act_quant_ref``; every fallback with the plain
activation. Test producers go into a patched copy of the registry table, so nothing leaks.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant import runtime
from fused_quant import registry
from fused_quant.selection import BACKENDS
from fused_quant.selection import Backend
from fused_quant.contract import QuantizedActivation, expose_input_quant_key, get_input_quant_key
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
from fused_quant.validation import (
    BackendUnavailableError,
    NumericsProfileError,
    QuantDTypeError,
    ScaleError,
    ShapeMismatchError,
)
from tests.helpers import adversarial_rows, assert_bits_equal

pytestmark = pytest.mark.torch

ACT_MODULES = {"silu_and_mul": SiluAndMul, "relu2": ReLUSquared, "identity": nn.Identity}
TEST_BACKEND = "test_backend"


@pytest.fixture(autouse=True)
def torch_backend(backend_env):
    backend_env("torch")


@pytest.fixture
def fake_backend(monkeypatch):
    """A backend named TEST_BACKEND, selected as current, with an empty producer table; the real
    table, backend list and selection are restored afterwards."""
    from fused_quant import selection

    monkeypatch.setattr(registry, "_PRODUCERS", {**registry._PRODUCERS, TEST_BACKEND: {}})
    monkeypatch.setitem(BACKENDS, TEST_BACKEND, Backend(TEST_BACKEND, "test", "tests", "any device",
                                                        any_device=True, modules=()))
    monkeypatch.setattr(selection, "_loaded", set(selection._loaded) | {TEST_BACKEND})
    monkeypatch.setattr(registry, "current_backend_name", lambda: TEST_BACKEND)
    monkeypatch.setattr(registry, "_CALLS", runtime.Cache("calls"))  # validated calls of this test only
    return TEST_BACKEND


def _input(act: str, dtype=torch.bfloat16, shape=(16, 64), seed=0) -> torch.Tensor:
    """Random rows; the first ones replaced by adversarial rows (zeros, NaN, Inf, denormals, max)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 4).to(dtype)
    rows = x.view(-1, shape[-1])
    n = min(len(rows), 8)
    rows[:n] = adversarial_rows(shape[-1], dtype, seed=seed)[:n]
    return x


def _scale(key):
    return torch.tensor([0.043], dtype=torch.float32) if K.is_static(key) else None


def _assert_qa_is_ref(qa, act: str, x: torch.Tensor, key: K.QuantKey, scale, numerics="default"):
    assert isinstance(qa, QuantizedActivation), type(qa)
    q, s = act_quant_ref(act, x, key, scale, numerics=numerics, fp8_dtype=registry.platform_fp8_dtype())
    assert_bits_equal(qa.data, q, f"{act}->{K.key_name(key)} q")
    assert_bits_equal(qa.scale, s, f"{act}->{K.key_name(key)} scale")
    assert qa.quant_key == K.normalize_key(key)
    assert qa.orig_dtype == x.dtype and qa.orig_shape == q.shape
    if K.is_static(key):
        assert qa.scale is scale  # the consumer's tensor itself


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
    # no producer for silu_and_mul on this backend: plain activation / the torch backend computes it
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    _assert_qa_is_ref(fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym), "silu_and_mul", x,
                      K.kInt8DynamicTokenSym, None)
    assert len(calls) == 2


def test_register_producer_rejects_unknown_activation_and_key(monkeypatch):
    monkeypatch.setattr(registry, "_PRODUCERS", {**registry._PRODUCERS})
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
    x = _input("silu_and_mul")  # width 64: declined
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    assert seen == [layer.input_scale]  # the predicate saw the layer's static scale
    # the functional form computes the same bits with the torch backend instead
    scale = torch.tensor([0.02])
    _assert_qa_is_ref(fused_act_quant(SiluAndMul(), x, K.kFp8StaticTensorSym, scale),
                      "silu_and_mul", x, K.kFp8StaticTensorSym, scale)
    # ... but a named backend never falls back
    with pytest.raises(BackendUnavailableError, match="only multiples of 128"):
        fused_act_quant(SiluAndMul(), x, K.kFp8StaticTensorSym, scale, backend=fake_backend)


def test_gpu_backend_on_cpu_tensors_falls_back(monkeypatch):
    """The triton_fp8 producers decline CPU tensors: maybe_fused returns the plain activation and
    fused_act_quant computes the same bits with the torch backend (counted as torch)."""
    monkeypatch.setattr(registry, "current_backend_name", lambda: "triton_fp8")
    monkeypatch.setattr(registry, "_CALLS", runtime.Cache("calls"))
    reset_fusion_counts()
    layer = QuantLinear.from_float(nn.Linear(32, 8), K.kInt8DynamicTokenSym)
    x = _input("silu_and_mul")
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, layer), SiluAndMul(), x)
    _assert_qa_is_ref(fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym), "silu_and_mul", x,
                      K.kInt8DynamicTokenSym, None)
    assert fusion_counts() == {("torch", "silu_and_mul", "int8_dynamic_token"): 1}
    with pytest.raises(BackendUnavailableError, match="Triton kernels run on GPU tensors; input is on cpu"):
        fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym, backend="triton_fp8")


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
    with pytest.raises(TypeError, match="expects a QuantKey or a kernel, got str"):
        expose_input_quant_key(linear, "fp8_dynamic_token")


def _assert_plain(y, act_fn, x):
    assert type(y) is torch.Tensor, type(y)
    assert_bits_equal(y, act_fn(x), "plain activation")


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


def test_maybe_fused_with_a_key_no_producer_handles_falls_back():
    # vLLM's kFp8Dynamic128Sym: FP8, dynamic, group (1, 128). A vLLM linear may expose it; model code
    # calls maybe_fused_act_quant unconditionally, so the contract's "otherwise act_fn(x)" applies.
    group_key = K.QuantKey(K.FP8_DTYPE, K.ScaleDesc(torch.float32, False, K.GroupShape(1, 128)))
    linear = nn.Linear(32, 8)
    expose_input_quant_key(linear, group_key)
    x = _input("silu_and_mul")
    _assert_plain(maybe_fused_act_quant(SiluAndMul(), x, linear), SiluAndMul(), x)


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


# --- validated calls: a producer bound per call signature --------------------------------------


class _BindingProducer:
    """A producer with ``bind``: records each bind and each bound call; computes the reference."""

    def __init__(self, act: str, key: K.QuantKey):
        self.act, self.key, self.binds, self.calls = act, key, [], 0

    def fn(self, x, scale, *, numerics, fp8_dtype):
        return act_quant_ref(self.act, x, self.key, scale, numerics=numerics, fp8_dtype=fp8_dtype)

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
    register_producer(ReLUSquared, K.kInt8StaticTensorSym, backend=fake_backend)(lambda *a, **k: None)
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

    register_producer(ReLUSquared, K.kInt8DynamicTokenSym, backend=fake_backend, bind=bind_during_a_clear)(p.fn)
    x = _input("relu2")
    _assert_qa_is_ref(fused_act_quant("relu2", x, K.kInt8DynamicTokenSym), "relu2", x, K.kInt8DynamicTokenSym, None)
    assert not registry._CALLS and p.calls == 1
    fused_act_quant("relu2", x, K.kInt8DynamicTokenSym)
    assert len(checks) == 2
