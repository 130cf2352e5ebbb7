"""The vLLM plugin in-process, without an engine: registration (idempotent, gated on the version,
silent on missing internals), the producer rows, and the int8 kernel's contract."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

from fused_quant import keys as K
from fused_quant.integrations import vllm as plugin
from fused_quant.reference import act_quant_ref
from fused_quant.validation import QuantDTypeError, QuantKeyMismatchError, ScaleError, ShapeMismatchError
from tests.helpers import assert_bits_equal, assert_gemm_close

pytestmark = pytest.mark.vllm  # skipped centrally (conftest) where vLLM is not installed


@pytest.fixture
def fresh(monkeypatch):
    """A process where register() has not run yet; vLLM's tables restored afterwards."""
    v = plugin.internals()
    producers, supports = dict(v.producers), dict(v.supports)
    int8 = {p: list(chain) for p, chain in v.possible_int8.items()}
    for name, value in {"done": False, "active": False, "reason": "register() not called", "rows": [],
                        "kernel": None, "placement": None}.items():  # every field, each put back as it was afterwards
        monkeypatch.setitem(plugin._state, name, value)
    yield v
    v.producers.clear()
    v.producers.update(producers)
    v.supports.clear()
    v.supports.update(supports)
    v.possible_int8.clear()
    v.possible_int8.update(int8)


def _ours_in(chain):
    return [k.__name__ for k in chain].count(plugin.KERNEL_NAME)


def test_register_is_idempotent_and_never_replaces_a_working_row(fresh, monkeypatch):
    monkeypatch.setenv("FUSED_QUANT_VLLM_KERNEL", "first")
    plugin.register()
    plugin.register()
    assert plugin.status()["active"]
    v = fresh
    for name in plugin.PLATFORMS:
        chain = v.possible_int8[v.platforms[name]]
        assert _ours_in(chain) == 1 and chain[0].__name__ == plugin.KERNEL_NAME
    silu = v.acts["SiluAndMul"]
    key = plugin.to_vllm_key(K.kInt8DynamicTokenSym)
    assert v.producers[(silu, key)].__qualname__.startswith("fused_quant_")
    # vLLM's own FP8 static row uses a CUDA op: replaced on CPU, kept where the op exists
    fp8_static = (silu, plugin.to_vllm_key(K.kFp8StaticTensorSym))
    ours = v.producers[fp8_static].__qualname__.startswith("fused_quant_")
    assert ours == (not hasattr(torch.ops._C, "silu_and_mul_quant"))


@pytest.mark.parametrize("placement", ["first", "last", "off"])
def test_kernel_placement(fresh, monkeypatch, placement):
    monkeypatch.setenv("FUSED_QUANT_VLLM_KERNEL", placement)
    plugin.register()
    chain = fresh.possible_int8[fresh.platforms["CPU"]]
    if placement == "off":
        assert _ours_in(chain) == 0
    else:
        assert _ours_in(chain) == 1
        assert (chain[0] if placement == "first" else chain[-1]).__name__ == plugin.KERNEL_NAME


def test_outside_the_tested_range_registers_nothing(fresh, monkeypatch, caplog):
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.31.9")
    before = dict(fresh.producers)
    with caplog.at_level(logging.WARNING, logger="fused_quant"):
        plugin.register()
    assert not plugin.status()["active"]
    assert "outside the tested range" in plugin.status()["reason"]
    assert fresh.producers == before
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1


def test_a_missing_internal_registers_nothing(fresh, monkeypatch):
    def broken():
        raise AttributeError("module 'vllm...fused_act_quant' has no attribute '_FUSED_ACT_QUANT'")

    monkeypatch.setattr(plugin, "plan_rows", broken)
    plugin.register()
    assert not plugin.status()["active"]
    assert "_FUSED_ACT_QUANT" in plugin.status()["reason"]


def _tables(v):
    return dict(v.producers), dict(v.supports), {p: list(c) for p, c in v.possible_int8.items()}


@pytest.mark.parametrize("name,value,reason", [
    ("FUSED_QUANT_VLLM_KERNEL", "sometimes", "FUSED_QUANT_VLLM_KERNEL='sometimes' is not one of first, last, off"),
    ("FUSED_QUANT_VLLM_FUSION", "maybe", "FUSED_QUANT_VLLM_FUSION='maybe' is not one of on, off"),
    ("FUSED_QUANT_NUMERICS", "bogus", "FUSED_QUANT_NUMERICS='bogus' is not one of default, hcu"),
    ("FUSED_QUANT_BACKEND", "tritn", "FUSED_QUANT_BACKEND='tritn' is not a backend"),
    ("FUSED_QUANT_BACKEND", "triton_fp8", "FUSED_QUANT_BACKEND=triton_fp8 cannot run here"),
    ("FUSED_QUANT_PDL", "maybe", "FUSED_QUANT_PDL='maybe' is not one of on, off"),
    ("FUSED_QUANT_DISABLED_GEMMS", "torch_int8_f64,int_mm_int8,triton_int8,small_m_int8,hipblaslt_w8a8",
     "FUSED_QUANT_DISABLED_GEMMS leaves the int8 kernel no int8 GEMM provider on backend"),
])
def test_a_setting_the_calls_would_refuse_registers_nothing(fresh, monkeypatch, name, value, reason):
    """Before, a bad FUSION value raised out of register() (a traceback at the engine's start) after every row was
    added, and a bad numerics profile or a backend this node cannot run failed the engine's first request; so did a
    bad PDL value (read at the first Triton launch) and disabled GEMMs that leave the int8 kernel none."""
    import fused_quant

    if name == "FUSED_QUANT_BACKEND" and value == "triton_fp8" and torch.cuda.is_available():
        pytest.skip("triton_fp8 may run on this node")
    monkeypatch.setenv(name, value)
    fused_quant.reset()  # settings are read once per runtime state
    before = _tables(fresh)
    try:
        plugin.register()
        assert not plugin.status()["active"] and reason in plugin.status()["reason"]
        assert _tables(fresh) == before
        report = plugin.describe()
        assert not report["would_register"] and reason in report["reason"] and "rows" not in report
    finally:
        monkeypatch.delenv(name)
        fused_quant.reset()


def test_a_changed_vllm_registers_nothing(fresh, monkeypatch):
    """A vLLM internal with another signature (TypeError) is a missing internal; a table change that fails half
    way puts every table back."""
    before = _tables(fresh)

    def drifted(key):
        raise TypeError("QuantKey.__init__() takes from 3 to 4 positional arguments but 5 were given")

    monkeypatch.setattr(plugin, "to_vllm_key", drifted)
    plugin.register()
    assert not plugin.status()["active"] and "missing or changed: TypeError" in plugin.status()["reason"]
    assert _tables(fresh) == before
    monkeypatch.undo()
    monkeypatch.setitem(plugin._state, "done", False)
    monkeypatch.setenv("FUSED_QUANT_VLLM_KERNEL", "first")
    platform = next(iter(fresh.platforms.values()))
    monkeypatch.setattr(plugin, "_kernel_chains", lambda placement: {platform: 42})  # not a list: fails late
    plugin.register()
    assert not plugin.status()["active"] and "could not be changed" in plugin.status()["reason"]
    assert _tables(fresh) == before  # the producer rows added before the failure are gone again


def test_any_failure_building_the_rows_leaves_it_inactive_naming_it(fresh, monkeypatch):
    """vLLM calls plugins unguarded: an exception of another type (an AssertionError of a setuptools shim while
    vLLM's internals import) escaped register() and left the status saying it was never called."""
    before = _tables(fresh)

    def shim(*args):
        raise AssertionError("distutils has already been patched")

    monkeypatch.setattr(plugin, "internals", shim)
    plugin.register()
    status = plugin.status()
    assert not status["active"] and status["done"]
    assert status["reason"] == "building what it registers failed: AssertionError: distutils has already been patched"
    assert _tables(fresh) == before
    assert plugin.describe()["reason"] == "AssertionError: distutils has already been patched"


def test_a_misspelt_disabled_gemm_is_named_in_the_log_line(fresh, monkeypatch, caplog):
    import fused_quant

    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "typo_gemm")
    fused_quant.reset()
    try:
        with caplog.at_level(logging.WARNING, logger="fused_quant"), warnings.catch_warnings():
            warnings.simplefilter("error")  # the log line says it: not the library's RuntimeWarning too
            plugin.register()
        assert plugin.status()["active"]  # a warning: it disables nothing
        (line,) = [r.message for r in caplog.records if "plugin active" in r.message]
        assert "; warning: FUSED_QUANT_DISABLED_GEMMS names no GEMM provider called 'typo_gemm'" in line
    finally:
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fused_quant.reset()


def test_the_kernel_says_once_why_it_declines_a_layer(caplog):
    cls = plugin.kernel_class()  # each test starts a fresh runtime generation (conftest): nothing said yet
    with caplog.at_level(logging.WARNING, logger="fused_quant"):
        for _ in range(3):
            cls.can_implement(_config(static=True))
            cls.can_implement(_config(symmetric=False))
        cls.can_implement(_config())
    lines = [r.getMessage() for r in caplog.records if "declines a layer" in r.getMessage()]
    assert len(lines) == 2 and "static activation scales" in lines[0] and "asymmetric" in lines[1]
    assert not any("vLLM's own" in line for line in lines)  # the kernel's place unknown: nothing said of it


@pytest.mark.parametrize("placement,after", [
    ("first", "; vLLM's own int8 kernels are asked next"),
    ("last", "; it comes after vLLM's own int8 kernels, which declined the layer too: vLLM has no kernel left for "
             "it"),
])
def test_a_declined_layer_is_said_with_what_follows_for_the_kernels_place(caplog, monkeypatch, placement, after):
    """The line said "vLLM's own int8 kernel runs it" under every placement; last in the chain, vLLM's own had
    declined the layer already and the engine then failed on it."""
    monkeypatch.setitem(plugin._state, "placement", placement)
    with caplog.at_level(logging.WARNING, logger="fused_quant"):
        plugin.kernel_class().can_implement(_config(static=True))
    lines = [r.getMessage() for r in caplog.records if "declines a layer" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith(f"static activation scales are left to vLLM's kernels (this one is "
                                                 f"per-token){after}"), lines


@pytest.mark.parametrize("act", ["silu_and_mul", "relu2"])
@pytest.mark.parametrize("key", plugin.ROW_KEYS, ids=K.key_name)
def test_producers_return_vllm_activations_equal_to_the_reference(act, key):
    produce, supported = plugin._make_producer(act, key, plugin.to_vllm_key(key))
    x = (torch.randn(5, 64) * 3).to(torch.bfloat16)
    linear = torch.nn.Module()
    linear.input_scale = torch.tensor([0.05])
    assert supported(None, x, linear)
    qa = produce(x, linear)
    assert isinstance(qa, plugin.internals().QuantizedActivation)
    assert qa.quant_key == plugin.to_vllm_key(key)
    q, s = act_quant_ref(act, x, key, linear.input_scale if K.is_static(key) else None)
    assert_bits_equal(qa.data, q)
    assert_bits_equal(qa.scale, s)
    assert not supported(None, x.int(), linear)
    if act == "silu_and_mul":
        assert not supported(None, x[:, :63], linear)
    if K.is_static(key):
        del linear.input_scale
        assert not supported(None, x, linear)


def _config(symmetric=True, static=False, channelwise=True):
    from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import Int8ScaledMMLinearLayerConfig

    return Int8ScaledMMLinearLayerConfig(is_static_input_scheme=static, is_channelwise=channelwise,
                                         input_symmetric=symmetric)


def test_kernel_declines_configs_it_cannot_run_with_reasons():
    cls = plugin.kernel_class()
    assert cls.is_supported() == (True, None)
    assert cls.can_implement(_config()) == (True, None)
    ok, why = cls.can_implement(_config(symmetric=False))
    assert not ok and "asymmetric" in why
    ok, why = cls.can_implement(_config(static=True))
    assert not ok and "static" in why


def _layer(n=48, k=64, channelwise=True, scales=None):
    layer = torch.nn.Module()
    layer.prefix = "model.layers.0.mlp.down_proj"
    layer.weight = torch.nn.Parameter(torch.randint(-127, 128, (n, k), dtype=torch.int8), requires_grad=False)
    if scales is None:
        scales = torch.rand(n, 1) * 0.01 + 1e-3 if channelwise else torch.tensor([0.004, 0.006])
    layer.weight_scale = torch.nn.Parameter(scales, requires_grad=False)
    layer.logical_widths = [n] if channelwise else [n // 2, n // 2]
    kernel = plugin.kernel_class()(_config(channelwise=channelwise), ["weight", "weight_scale", "input_scale",
                                                                      "input_zero_point", "azp_adj"])
    kernel.process_weights_after_loading(layer)
    return layer, kernel


@pytest.mark.parametrize("scales, error", [
    (torch.full((48, 1), float("nan")), "finite and >= 0"), (-torch.rand(48, 1) - 0.1, "finite and >= 0"),
    (torch.rand(24, 1), "N=48 scales")])
def test_kernel_refuses_weight_scales_at_load_naming_the_layer(scales, error):
    """NaN scales gave NaN outputs and negative ones sign-flipped outputs, with no error; a scale of another N failed
    only in the first call."""
    with pytest.raises(ScaleError, match=f"model.layers.0.mlp.down_proj.*{error}"):
        _layer(scales=scales)


@pytest.mark.parametrize("count", [1, 3])
def test_kernel_counts_per_tensor_scales_against_the_parts(count):
    """A per-tensor layer of two fused parts takes two scales: a third was dropped in silence by vLLM's helper, one
    failed there with an IndexError naming no layer."""
    with pytest.raises(ScaleError, match=r"model.layers.0.mlp.down_proj: a per-tensor weight_scale holds one scale "
                                         rf"per part \(2: \[24, 24\]\), got {count}"):
        _layer(channelwise=False, scales=torch.full((count,), 0.004))


@pytest.mark.parametrize("channelwise", [True, False])
def test_kernel_exposes_its_key_and_consumes_both_inputs(channelwise):
    from vllm.model_executor.layers.fusion.quant_activation import get_input_quant_key

    layer, kernel = _layer(channelwise=channelwise)
    assert get_input_quant_key(layer) == plugin.to_vllm_key(K.kInt8DynamicTokenSym)
    assert layer.weight_scale.shape == (48, 1) and layer.weight_scale.dtype == torch.float32
    x = torch.randn(6, 64).to(torch.bfloat16)
    out_plain = kernel.apply_weights(layer, x)
    produce, _ = plugin._make_producer("identity", K.kInt8DynamicTokenSym, plugin.to_vllm_key(K.kInt8DynamicTokenSym))
    qa = produce(x, layer)
    out_qa = kernel.apply_weights(layer, qa)
    assert torch.equal(out_plain, out_qa)
    assert_gemm_close(out_qa, qa.data, qa.scale, layer.weight, layer.weight_scale, exact_acc=True)


def test_kernel_takes_vllms_bias_parameter_with_grad_on():
    """vLLM's linear layers hold their bias as a plain Parameter (it requires grad); called with grad on (outside
    the engine's inference mode, e.g. LLM.apply_model) the kernel computes as vLLM's own would, with no graph."""
    layer, kernel = _layer()
    bias = torch.nn.Parameter(torch.randn(48).to(torch.bfloat16))
    x = torch.randn(6, 64).to(torch.bfloat16)
    with torch.enable_grad():
        out = kernel.apply_weights(layer, x, bias)
    with torch.no_grad():
        want = kernel.apply_weights(layer, x, bias.detach())
    assert not out.requires_grad and torch.equal(out, want)


def test_kernel_refuses_wrong_k_and_wrong_key_naming_the_layer():
    layer, kernel = _layer()
    placeholder = torch.randn(6, 128).to(torch.bfloat16)  # a gate_up-sized activation
    with pytest.raises(ShapeMismatchError, match="down_proj: expected K=64 .* received K=128"):
        kernel.apply_weights(layer, placeholder)
    v = plugin.internals()
    wrong = v.QuantizedActivation(torch.zeros(6, 64, dtype=torch.int8), torch.ones(6, 1), torch.bfloat16,
                                  torch.Size([6, 64]), plugin.to_vllm_key(K.kFp8DynamicTokenSym))
    with pytest.raises(QuantKeyMismatchError, match="down_proj"):
        kernel.apply_weights(layer, wrong)


@pytest.mark.parametrize("x,error,message", [
    (torch.tensor(1.0).to(torch.bfloat16), ShapeMismatchError, r"activation must have rank >= 1 \(\[\.\.\., K=64\]\)"),
    (torch.zeros(6, 0).to(torch.bfloat16), ShapeMismatchError, r"expected K=64 .* received K=0"),
    (torch.zeros(6, 64, dtype=torch.int8), QuantDTypeError,
     r"a plain input is quantized to int8_dynamic_token here and must be bfloat16, float16 or float32, got "
     r"torch.int8 \(a quantized one comes as a QuantizedActivation\)"),
], ids=["0-d", "K=0", "int8 codes"])
def test_kernel_refuses_a_plain_input_its_quantizer_refuses_naming_the_layer(x, error, message):
    """The quantizer's refusals of a plain input named "identity" and no layer, and a K of 0 no expected K (README:
    a wrong-K or wrong-rank operand becomes a ShapeMismatchError naming the layer)."""
    layer, kernel = _layer()
    with pytest.raises(error, match=f"^model.layers.0.mlp.down_proj: {message}"):
        kernel.apply_weights(layer, x)


def test_fusion_off_hides_the_key_and_declines_the_producer_rows(fresh, monkeypatch):
    """Off for A/B comparisons: the kernel shows no input key and the producer rows the plugin added decline, so vLLM
    runs the activation and its own quantization (the FP8 rows, whose keys vLLM's own kernels show, kept fusing). The
    rows read the setting once, when vLLM loads the plugin: not at each call (an environment read per MLP)."""
    _, kernel = _layer()
    x, linear = torch.randn(5, 64).to(torch.bfloat16), torch.nn.Module()
    linear.input_scale = torch.tensor([0.05])
    monkeypatch.setenv("FUSED_QUANT_VLLM_FUSION", "off")
    plugin.register()
    assert plugin.status()["active"] and kernel.input_quant_key() is None
    added = [r for r in plugin.status()["rows"] if not r["action"].startswith("keep")]
    assert added  # on this node's vLLM some rows are the plugin's
    for row in added:
        where = (fresh.acts[row["activation"]], plugin.to_vllm_key(K.key_from_name(row["key"])))
        assert fresh.supports[where] is plugin._declines and not fresh.supports[where](None, x, linear)
    for act in ("silu_and_mul", "relu2"):
        for key in plugin.ROW_KEYS:
            assert plugin._make_producer(act, key, plugin.to_vllm_key(key))[1](None, x, linear)  # on: takes x


def test_probe_says_when_vllm_would_not_load_the_plugin(monkeypatch):
    """describe() (``fused-quant probe --vllm``) checks what makes vLLM call register() at all: VLLM_PLUGINS, where
    set, must name the plugin, and the entry point must be installed."""
    import importlib.metadata

    assert plugin.describe()["would_register"]
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin")
    report = plugin.describe()
    assert not report["would_register"] and "VLLM_PLUGINS='some_other_plugin' does not name fused_quant" in \
        report["reason"]
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin,fused_quant")
    assert plugin.describe()["would_register"]
    monkeypatch.delenv("VLLM_PLUGINS")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [])
    report = plugin.describe()
    assert not report["would_register"] and "entry point is installed" in report["reason"]


def test_fused_quant_settings_key_vllms_compile_cache(fresh, monkeypatch):
    """vLLM loads a compiled graph from its disk cache by its config and its own variables: a graph compiled with
    the kernel first (fused-quant's GEMM op on fused-quant's weight layout) was keyed as one compiled with it last or
    off, or with fusion off. Each FUSED_QUANT_* variable is part of vLLM's compile factors once the plugin ran,
    active or not."""
    from vllm import envs as vllm_envs

    for name in plugin.envs.VARIABLES:
        monkeypatch.delitem(vllm_envs.environment_variables, name, raising=False)
    monkeypatch.setenv("FUSED_QUANT_VLLM_KERNEL", "first")
    monkeypatch.setattr("vllm.__version__", "0.31.9")  # inactive: its graphs must not be another run's either
    plugin.register()
    assert not plugin.status()["active"]
    factors = vllm_envs.compile_factors()
    assert set(plugin.envs.VARIABLES) <= set(factors)
    first = vllm_envs.compile_factors()["FUSED_QUANT_VLLM_KERNEL"]
    monkeypatch.setenv("FUSED_QUANT_VLLM_KERNEL", "last")
    assert vllm_envs.compile_factors()["FUSED_QUANT_VLLM_KERNEL"] != first
    unset = vllm_envs.compile_factors()["FUSED_QUANT_VLLM_FUSION"]
    monkeypatch.setenv("FUSED_QUANT_VLLM_FUSION", "off")
    assert vllm_envs.compile_factors()["FUSED_QUANT_VLLM_FUSION"] != unset
