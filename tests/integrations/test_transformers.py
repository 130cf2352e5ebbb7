"""quantize_model on transformers models built from small configs (random weights, no downloads).

Per architecture of MODEL_MLPS: no nn.Linear left in the MLPs, one producer call per MLP per
forward, fused logits bitwise equal to unfused (default profile), teacher-forced top-1 equal to the
float model's wherever its margin exceeds twice the logit error, generate with left padding equal to
unpadded; then the refusals, targets="all", the structural match and torch.compile.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types

import warnings

import pytest
import torch
from torch import nn

pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

import fused_quant as fq  # noqa: E402
from fused_quant.integrations import transformers as fqt  # noqa: E402

pytestmark = [pytest.mark.transformers]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMALL = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
             num_hidden_layers=2)
ARCHS = ("llama", "qwen2", "qwen3", "mistral", "nemotron", "nemotron_h", "phi3")


def make_config(arch: str, **overrides):
    import transformers as tf

    if arch == "nemotron_h":  # hybrid: the MLP blocks' MLP sits at layers[i].mixer
        return tf.NemotronHConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                                  vocab_size=256, head_dim=16, layers_block_type=["mamba", "mlp", "attention", "mlp"],
                                  mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16, n_groups=1, **overrides)
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "qwen3": tf.Qwen3Config, "mistral": tf.MistralConfig,
           "nemotron": tf.NemotronConfig, "phi3": tf.Phi3Config, "olmo": tf.OlmoConfig}[arch]
    extra = {"qwen3": {"head_dim": 16}, "phi3": {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}}.get(arch, {})
    return cls(**{**SMALL, **extra, **overrides})


def make_model(arch: str, dtype=torch.float32, seed: int = 0, **overrides) -> nn.Module:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(make_config(arch, **overrides), dtype=dtype).eval()


def mlp_count(model) -> int:
    return sum(isinstance(m, (fqt.QuantGatedMLP, fqt.QuantMLP)) for m in model.modules())


def token_ids(batch: int = 2, seq: int = 9, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, 256, (batch, seq), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def logits(model, ids) -> torch.Tensor:
    return model(ids).logits


def act_of(arch: str) -> str:
    """The fused producer's activation of an architecture's MLP."""
    return "relu2" if arch.startswith("nemotron") else "silu_and_mul"


def assert_top1_where_the_margin_is_clear(out: torch.Tensor, ref: torch.Tensor) -> None:
    """W8A8 logits ``out`` against the float model's ``ref``: a few percent off at most, and the same top-1
    wherever ref's top-1/top-2 margin exceeds twice the largest logit error."""
    err = (out - ref).abs().max()
    top2 = ref.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1]) > 2 * err
    assert err < 0.05 * ref.abs().max()  # W8A8 of a random model: a few percent at most
    assert clear.float().mean() > 0.3, "too few positions with a clear margin: the check would say nothing"
    assert torch.equal(out.argmax(-1)[clear], ref.argmax(-1)[clear])


@pytest.mark.parametrize("arch", ARCHS)
def test_mlps_converted_and_one_producer_call_per_mlp(arch):
    model = make_model(arch)
    classes = fqt.MODEL_MLPS[arch]
    before = [n for n, m in model.named_modules() if type(m).__name__ in classes]
    report = fqt.quantize_model(model)
    assert report.fused == before and not report.unfused and not report.skipped
    for name in before:
        mlp = model.get_submodule(name)
        assert not any(isinstance(m, nn.Linear) for m in mlp.modules()), name
        assert all(isinstance(m, fq.QuantLinear) and m.name.startswith(name) for m in mlp.children()
                   if not isinstance(m, (fq.SiluAndMul, fq.ReLUSquared)))
    act = act_of(arch)
    fq.reset_fusion_counts()
    logits(model, token_ids())
    assert fq.fusion_counts() == {("torch", act, "int8_dynamic_token"): len(before),
                                  ("torch", "identity", "int8_dynamic_token"): len(before)}


@pytest.mark.parametrize("arch", ARCHS)
def test_fused_logits_bitwise_equal_unfused(arch):
    fused, unfused = make_model(arch, torch.bfloat16), make_model(arch, torch.bfloat16)
    fqt.quantize_model(fused)
    assert fqt.quantize_model(unfused, fuse=False).unfused
    fq.reset_fusion_counts()
    a, b = logits(fused, token_ids()), logits(unfused, token_ids())
    assert torch.equal(a, b)
    assert any(k[1] != "identity" for k in fq.fusion_counts())  # the fused model did fuse


@pytest.mark.parametrize("arch", ARCHS)
def test_teacher_forced_top1_matches_the_float_model_where_the_margin_is_clear(arch):
    model = make_model(arch)
    ref = logits(model, token_ids(4, 16))
    fqt.quantize_model(model)
    assert_top1_where_the_margin_is_clear(logits(model, token_ids(4, 16)), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("arch", ARCHS)
def test_generate_batched_left_padding_equals_unpadded(arch, dtype):
    model = make_model(arch, dtype)
    fqt.quantize_model(model)
    prompts = [token_ids(1, 7, seed=2)[0], token_ids(1, 4, seed=3)[0]]
    pad = 0
    width = max(len(p) for p in prompts)
    ids = torch.stack([torch.cat([torch.full((width - len(p),), pad), p]) for p in prompts])
    mask = (torch.arange(width) >= torch.tensor([[width - len(p)] for p in prompts])).long()
    gen = dict(max_new_tokens=6, do_sample=False, pad_token_id=pad)
    batched = model.generate(ids, attention_mask=mask, **gen)[:, width:]
    for row, p in zip(batched, prompts):
        alone = model.generate(p[None], attention_mask=torch.ones(1, len(p), dtype=torch.long), **gen)[0, len(p):]
        # a prompt that stops at its EOS alone is padded after it in the batch
        assert torch.equal(row[:len(alone)], alone) and bool((row[len(alone):] == pad).all()), (row, alone)


def test_targets_all_ignore_and_filter_fn():
    model = make_model("llama")
    report = fqt.quantize_model(model, targets="all", filter_fn=lambda m, name: "layers.1.self_attn.o_proj" not in name)
    left = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert left == ["model.layers.1.self_attn.o_proj", "lm_head"]
    reasons = {e.name: e.reason for e in report.entries if e.status == "skipped"}
    assert reasons == {"model.layers.1.self_attn.o_proj": "filter_fn returned False", "lm_head": "ignore matches 'lm_head'"}
    assert len(report.names("quantized")) == 4 + 3  # q, k, v, o of layer 0; q, k, v of layer 1
    logits(model, token_ids())


def test_ignore_one_linear_of_an_mlp_skips_that_mlp():
    model = make_model("llama")
    report = fqt.quantize_model(model, ignore=("lm_head", "re:.*layers\\.0\\.mlp\\.down_proj$"))
    assert report.fused == ["model.layers.1.mlp"]
    assert report.entries[0].reason.startswith("down_proj ignore matches")
    assert type(model.model.layers[0].mlp).__name__ == "LlamaMLP"


def test_unknown_activation_quantizes_the_linears_and_runs_unfused():
    model = make_model("llama", hidden_act="gelu")
    report = fqt.quantize_model(model)
    assert not report.fused and len(report.unfused) == 2
    assert "GELUActivation has no fused-quant producer" in report.entries[0].reason
    twin = make_model("llama", hidden_act="gelu")
    fqt.quantize_model(twin, fuse=False)
    fq.reset_fusion_counts()
    assert torch.equal(logits(model, token_ids()), logits(twin, token_ids()))
    assert set(fq.fusion_counts()) == {("torch", "identity", "int8_dynamic_token")}


def test_lora_like_linear_is_skipped_and_a_converted_layer_that_turns_lora_falls_back():
    model = make_model("llama", torch.bfloat16)
    model.model.layers[0].mlp.up_proj.requires_unquantized_input = True
    report = fqt.quantize_model(model)
    assert report.skipped == ["model.layers.0.mlp"] and "requires_unquantized_input" in report.entries[0].reason
    assert isinstance(model.model.layers[0].mlp.up_proj, nn.Linear)
    ids = token_ids()
    before = logits(model, ids)
    down = model.model.layers[1].mlp.down_proj
    down.requires_unquantized_input = True  # no producer may target it now: the plain activation goes in
    fq.reset_fusion_counts()
    assert torch.equal(logits(model, ids), before)  # the layer quantizes it itself: the same bits
    assert set(fq.fusion_counts()) == {("torch", "identity", "int8_dynamic_token")}


def test_wrong_k_raises_shape_mismatch_naming_the_layer():
    model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(model)
    down = model.model.layers[0].mlp.down_proj
    with pytest.raises(fq.ShapeMismatchError) as err:
        down(torch.randn(3, 64, dtype=torch.bfloat16))  # the hidden size, not the intermediate 128
    assert err.value.layer == "model.layers.0.mlp.down_proj" and "model.layers.0.mlp.down_proj" in str(err.value)


@pytest.mark.parametrize("kwargs, match", [
    (dict(key="int8_static_tensor"), "needs calibrated input scales"),
    (dict(key="int4"), "unknown quant key name 'int4'"),
    (dict(targets="attention"), "targets must be 'mlp' or 'all', got 'attention'"),
    (dict(numerics="fast"), "fast"),
])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(fq.FusedQuantError, match=match):
        fqt.quantize_model(make_model("llama"), **kwargs)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ignore=None), TypeError, "ignore must be a pattern or an iterable of patterns .* got NoneType"),
    (dict(ignore=["lm_head", None]), TypeError, "ignore's patterns must be strings, got None"),
    (dict(filter_fn="x"), TypeError, "filter_fn must be a callable \\(module, name\\) -> bool or None, got str"),
    (dict(ignore=("re:[",)), ValueError, "ignore pattern 're:\\[' is not a regular expression: unterminated character "
                                         "set"),
])
def test_bad_argument_types_are_named(kwargs, error, match):
    model = make_model("llama")
    with pytest.raises(error, match="quantize_model: " + match):
        fqt.quantize_model(model, **kwargs)
    assert mlp_count(model) == 0


def test_a_conversion_that_fails_leaves_the_float_model_as_it_was():
    """Layer 1's gate has a bias and its up none, which no merged gate_up holds: the conversion stops there, and
    layer 0's MLP, converted already, is put back, so the model is the float one (its own save_pretrained too)."""
    model = make_model("llama")
    mlp = model.model.layers[1].mlp
    mlp.gate_proj = nn.Linear(64, 128, bias=True)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ids = token_ids()
    with torch.no_grad():
        want = model(ids).logits
    modules = dict(model.named_modules())
    with pytest.raises(fq.ShapeMismatchError, match="either every linear has a bias or none has"):
        fqt.quantize_model(model, targets="all")
    assert dict(model.named_modules()) == modules  # the same module objects where they were
    assert not any(isinstance(m, (fq.QuantLinear, fqt.QuantGatedMLP)) for m in model.modules())
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with torch.no_grad():
        assert torch.equal(model(ids).logits, want)
    assert "save_pretrained" not in vars(model) and not hasattr(model, "fused_quant_report")
    mlp.gate_proj = nn.Linear(64, 128, bias=False)  # mended: the same model converts
    assert mlp_count(model) == 0 and fqt.quantize_model(model).fused


def test_a_failed_conversion_of_a_model_sharing_an_mlp_puts_every_path_back():
    """An MLP shared by two layers (one module, two paths): the MLP pass converts it at its first path, the linear
    pass the second path's linears, then a filter raises; every path gets its float module back and the user's
    error is the one raised."""
    model = make_model("llama")
    shared = model.model.layers[0].mlp
    model.model.layers[1].mlp = shared
    linears = {name: m for name, m in shared.named_children()}
    ids = token_ids()
    with torch.no_grad():
        want = model(ids).logits

    def refuse_lm_head(module, name):
        if name == "lm_head":
            raise RuntimeError("the user's filter fell over")
        return True

    with pytest.raises(RuntimeError, match="the user's filter fell over"):
        fqt.quantize_model(model, targets="all", ignore=(), filter_fn=refuse_lm_head)
    assert model.model.layers[0].mlp is shared and model.model.layers[1].mlp is shared
    assert dict(shared.named_children()) == linears
    assert not any(isinstance(m, (fq.QuantLinear, fqt.QuantGatedMLP)) for m in model.modules())
    with torch.no_grad():
        assert torch.equal(model(ids).logits, want)


class _ToyMLP(nn.Module):
    def __init__(self, act: nn.Module | None = None):
        super().__init__()
        act = nn.SiLU() if act is None else act
        self.gate_proj, self.up_proj, self.down_proj = nn.Linear(32, 48), nn.Linear(32, 48), nn.Linear(48, 32)
        self.act_fn = act

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class _Toy(nn.Module):
    def __init__(self, act: nn.Module):
        super().__init__()
        self.config = types.SimpleNamespace(model_type="toy")
        self.block = nn.ModuleDict({"mlp": _ToyMLP(act)})

    def forward(self, x):
        return self.block["mlp"](x)


def test_structural_match_is_opt_in_and_needs_a_known_activation():
    with pytest.raises(fq.UnsupportedError, match="model type 'toy' has no row in MODEL_MLPS"):
        fqt.quantize_model(_Toy(nn.SiLU()))
    toy = _Toy(nn.SiLU())
    x = torch.randn(5, 32)
    ref = toy(x).detach()
    mlp = toy.block["mlp"]
    expected = fq.QuantLinear.from_linears([mlp.gate_proj, mlp.up_proj], "int8_dynamic_token")(x)
    report = fqt.quantize_model(toy, structural=True)
    assert report.fused == ["block.mlp"]
    assert torch.equal(toy.block["mlp"].gate_up_proj(x), expected)  # the merged rows, as from_linears makes them
    assert (toy(x) - ref).abs().max() < 0.05 * ref.abs().max()
    gelu = _Toy(nn.GELU())
    with pytest.warns(UserWarning, match="nothing was quantized in _Toy: it found no MLP of a MODEL_MLPS row; "
                                         "targets='all' also quantizes"):
        assert fqt.quantize_model(gelu, structural=True).entries == []  # unknown activation: not matched
    assert isinstance(gelu.block["mlp"], _ToyMLP)
    assert "save_pretrained" not in gelu.__dict__  # still a float model: nothing refuses its own saving


class _MultipliedMLP(_ToyMLP):  # FalconH1's shape: the linears and SiLU of a gated MLP, multipliers in its forward
    def __init__(self):
        super().__init__()
        self.gate_multiplier, self.down_multiplier = 4.0, 0.25

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x) * self.gate_multiplier) * self.up_proj(x)) * \
            self.down_multiplier


class _ScaledMLP(_ToyMLP):  # a scale of its own, a buffer
    def __init__(self):
        super().__init__()
        self.register_buffer("global_scale", torch.ones(()))

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)) * self.global_scale


class _ClampedMLP(_ToyMLP):
    def forward(self, x):
        return self.down_proj((self.act_fn(self.gate_proj(x)) * self.up_proj(x)).clamp(-7.0, 7.0))


class _CastingMLP(_ToyMLP):  # an output dtype of its own
    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)).float()


class _ReshapingMLP(_ToyMLP):  # a forward tied to its own sizes: the probe cannot run it
    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)).view(-1, 32)


@pytest.mark.parametrize("mlp,why", [
    (_MultipliedMLP, r"its forward \(_MultipliedMLP.forward\) computes something else than down\(act\(gate\(x\)\) \* "
                     r"up\(x\)\)"),
    (_ScaledMLP, r"its forward \(_ScaledMLP.forward\) computes something else"),
    (_ClampedMLP, r"its forward \(_ClampedMLP.forward\) computes something else"),
    (_CastingMLP, r"its forward \(_CastingMLP.forward\) computes something else .* cast of its own"),
    (_ReshapingMLP, r"its forward could not be checked against the formula on a probe \(RuntimeError: "),
])
def test_a_structural_match_whose_forward_is_not_the_formula_is_skipped_and_its_linears_quantized_apart(mlp, why):
    """A structural match fuses an MLP only where its own forward computes ``down(act(gate(x)) * up(x))``: a
    multiplier, a scale of its own or a clamp (FalconH1's, DeepSeek-V4's) would be dropped by the fused module, a
    silently wrong output (36% off for FalconH1's multipliers). Such an MLP is reported skipped, saying why; with
    targets="all" its linears are quantized one by one inside its own forward; the module itself is only read."""
    toy = _Toy(nn.SiLU())
    toy.block["mlp"] = module = mlp()
    x = torch.randn(5, 32)
    with torch.no_grad():
        ref = toy(x)
    torch.manual_seed(7)
    with pytest.warns(UserWarning, match="were all skipped"):
        report = fqt.quantize_model(toy, structural=True)
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(3)), "the probe drew from the caller's random state"
    assert [(e.name, e.status) for e in report.entries] == [("block.mlp", "skipped")]
    assert re.search(why, report.entries[0].reason), report.entries[0].reason
    assert toy.block["mlp"] is module and type(module.gate_proj) is nn.Linear
    report = fqt.quantize_model(toy, targets="all", ignore=(), structural=True)
    assert report.skipped == ["block.mlp"] and sorted(report.names("quantized")) == [
        "block.mlp.down_proj", "block.mlp.gate_proj", "block.mlp.up_proj"]
    assert toy.block["mlp"] is module and isinstance(module.gate_proj, fq.QuantLinear)
    with torch.no_grad():
        assert (toy(x) - ref.to(toy(x).dtype)).abs().max() < 0.05 * ref.abs().max()


def test_a_model_with_nothing_quantized_keeps_transformers_save_pretrained(tmp_path):
    model = make_model("llama")
    with pytest.warns(UserWarning, match="the 2 modules it considered were all skipped"):
        report = fqt.quantize_model(model, filter_fn=lambda m, name: False)
    assert report.skipped and model.fused_quant_report is report
    model.save_pretrained(tmp_path / "float")  # transformers' own, as before the call
    assert (tmp_path / "float" / "config.json").exists()


def test_a_non_finite_weight_is_named_in_the_models_own_linear():
    """gate and up are merged into one layer: the error names up_proj and its own channel, not the merged row."""
    model = make_model("llama")
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight[3, 5] = float("nan")
    with pytest.raises(fq.ScaleError, match="^model.layers.0.mlp.up_proj: the float weight has a non-finite value in "
                                            "output channel 3 \\(nan at \\[3, 5\\]"):
        fqt.quantize_model(model)


def test_a_model_whose_weights_are_not_loaded_is_refused():
    """A model built on the meta device (or offloaded to disk) was "quantized" without a word: its layers held meta
    codes and scales, its forward returned meta tensors, and saving it failed in torch. Refused, naming it; the
    model is left as it was."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(make_config("llama"))
    with pytest.raises(fq.UnsupportedError, match=r"quantize_model: \d+ of the model's parameters are on the meta "
                                                  r"device \(e\.g\. \['model\.embed_tokens\.weight'"):
        fqt.quantize_model(model)
    assert mlp_count(model) == 0 and not hasattr(model, "fused_quant_report")


def test_quantizing_twice_is_refused():
    model = make_model("llama")
    fqt.quantize_model(model)
    report = model.fused_quant_report
    for key in ("int8_dynamic_token", "fp8_dynamic_token"):
        with pytest.raises(fq.UnsupportedError, match=r"holds fused-quant layers already \(6, e\.g\. "
                                                      r"\['model\.layers\.0\.mlp'"):
            fqt.quantize_model(model, key, targets="all")
    assert model.fused_quant_report is report  # the first call's report stays


@pytest.mark.parametrize("pattern", ["model.layers.0.mlp", "layers.0.mlp", "re:model\\.layers\\.0\\.mlp",
                                     "re:.*layers\\.0\\.mlp$"])
def test_an_ignored_module_keeps_what_it_holds_float_however_it_is_named(pattern):
    """A module's name or suffix in ``ignore`` covers its linears, as a ``re:`` pattern matching it does, an anchored
    one too (a plain name, and a pattern ending in $, skipped the MLP and quantized its three linears one by one with
    targets="all" while the report said the MLP was skipped)."""
    model = make_model("llama")
    report = fqt.quantize_model(model, targets="all", ignore=("lm_head", pattern))
    mlp = model.model.layers[0].mlp
    assert type(mlp).__name__ == "LlamaMLP" and all(type(m) is nn.Linear for m in (mlp.gate_proj, mlp.up_proj,
                                                                                   mlp.down_proj))
    assert report.fused == ["model.layers.1.mlp"] and not any(".layers.0.mlp." in n for n in report.names("quantized"))


@pytest.mark.parametrize("targets", ["mlp", "all"])
def test_a_module_shared_between_layers_is_converted_at_every_path(targets):
    """``named_modules`` lists a shared module once: converted there, the other layer kept the float one (silently).
    Now every path holds the one converted module, shared as before, and the report names each path."""
    model = make_model("llama")
    model.model.layers[1].mlp = model.model.layers[0].mlp
    if targets == "all":
        model.model.layers[1].self_attn.o_proj = model.model.layers[0].self_attn.o_proj
    ids = token_ids()
    report = fqt.quantize_model(model, targets=targets)
    layers = model.model.layers
    assert isinstance(layers[0].mlp, fqt.QuantGatedMLP) and layers[1].mlp is layers[0].mlp
    assert report.fused == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert next(e.reason for e in report.entries if e.name == "model.layers.1.mlp") == \
        "the module at model.layers.0.mlp, shared"
    if targets == "all":
        assert isinstance(layers[0].self_attn.o_proj, fq.QuantLinear)
        assert layers[1].self_attn.o_proj is layers[0].self_attn.o_proj
        assert "model.layers.1.self_attn.o_proj" in report.names("quantized")
    assert not any(type(m) is nn.Linear for n, m in model.named_modules(remove_duplicate=False)
                   if n.startswith("model.layers.") and (".mlp." in n or (targets == "all" and "o_proj" in n)))
    assert torch.isfinite(logits(model, ids)).all()


@pytest.mark.parametrize("ignored", [0, 1])
def test_a_shared_module_ignored_at_one_path_only_is_an_error_naming_its_paths(ignored):
    """One object cannot be float at one layer and quantized at another: whichever path ``ignore`` names, the call
    refuses, names both paths, and leaves the model float; no warning says the ignored path matches nothing."""
    model = make_model("llama")
    model.model.layers[1].mlp = model.model.layers[0].mlp
    ids = token_ids()
    before = logits(model, ids)
    other = 1 - ignored
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(fq.UnsupportedError, match=f"one LlamaMLP sits at model.layers.0.mlp, model.layers.1.mlp, "
                                                      f"and model.layers.{ignored}.mlp: ignore matches "
                                                      f"'model.layers.{ignored}.mlp' while model.layers.{other}.mlp "
                                                      "would be quantized"):
            fqt.quantize_model(model, ignore=("lm_head", f"model.layers.{ignored}.mlp"))
    assert type(model.model.layers[0].mlp).__name__ == "LlamaMLP" and model.model.layers[1].mlp is model.model.layers[0].mlp
    assert torch.equal(logits(model, ids), before)


def test_a_shared_decoder_layer_reports_each_path_of_its_mlp():
    model = make_model("llama")
    model.model.layers[1] = model.model.layers[0]
    report = fqt.quantize_model(model)
    assert report.fused == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert model.model.layers[1].mlp is model.model.layers[0].mlp


def test_a_negative_re_pattern_does_not_cover_the_modules_enclosing_what_it_spares():
    """``re:^(?!.*mlp)`` ("everything but the MLPs") matches an empty start of every path: it covers the linears
    whose own path it matches, not the MLPs through the enclosing ``model``."""
    model = make_model("llama")
    report = fqt.quantize_model(model, targets="all", ignore=("re:^(?!.*mlp)",))
    assert report.fused == ["model.layers.0.mlp", "model.layers.1.mlp"] and report.names("quantized") == []


def test_ignore_patterns_that_match_no_module_are_warned_of():
    """A pattern that names no module of the model (a misspelling, another family's name) is warned of: what it
    was meant to keep float is quantized."""
    model = make_model("llama")
    with pytest.warns(UserWarning, match="ignore patterns 'attn', 're:.*decoder' match no module of LlamaForCausalLM"):
        fqt.quantize_model(model, targets="all", ignore=("lm_head", "attn", "self_attn", "re:.*decoder"))
    assert type(model.model.layers[0].self_attn.q_proj) is nn.Linear


def test_ignore_given_as_one_string_is_one_pattern():
    model = make_model("llama")
    report = fqt.quantize_model(model, targets="all", ignore="lm_head")
    assert report.skipped == ["lm_head"] and isinstance(model.lm_head, nn.Linear)


def test_a_converted_model_pickles_and_its_report_lines_up(tmp_path):
    """torch.save of the whole model (and multiprocessing) pickles it: the refusing save_pretrained is an object,
    not a closure; the report's columns line up whatever the kinds' names."""
    model = make_model("phi3", torch.bfloat16)
    report = fqt.quantize_model(model, targets="all")
    torch.save(model, tmp_path / "model.pt")
    again = torch.load(tmp_path / "model.pt", weights_only=False)
    ids = token_ids()
    assert torch.equal(logits(again, ids), logits(model, ids))
    with pytest.raises(fq.UnsupportedError, match="fused_quant.integrations.transformers.save_pretrained"):
        again.save_pretrained(tmp_path / "bad")
    lines = str(report).splitlines()[1:]
    assert {"merged_gated_mlp", "linear"} <= {e.kind for e in report.entries}
    assert len({line.index(e.name) for line, e in zip(lines, report.entries)}) == 1, lines


def test_a_model_that_is_not_one_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="quantize_model: model must be a transformers model \\(a torch.nn.Module\\), "
                                        "got str"):
        fqt.quantize_model("meta-llama/Llama-3-8B")
    model = make_model("llama")
    fqt.quantize_model(model)
    holder = nn.Module()  # a module holding the converted layers, but no transformers model: no config to write
    holder.layer = model.model.layers[0]
    with pytest.raises(TypeError, match="save_pretrained: model must be a transformers model with a .config, got a "
                                        "Module without one"):
        fqt.save_pretrained(holder, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_transformers_save_pretrained_is_refused_on_converted_models_only(tmp_path):
    model = make_model("llama")
    fqt.quantize_model(model)
    with pytest.raises(fq.UnsupportedError, match="fused_quant.integrations.transformers.save_pretrained"):
        model.save_pretrained(tmp_path / "bad")
    # the transformers model inside (LlamaModel, holding the layers) wrote int8 codes that reloaded as float weights
    with pytest.raises(fq.UnsupportedError, match="fused_quant.integrations.transformers.save_pretrained"):
        model.model.save_pretrained(tmp_path / "inner")
    assert not (tmp_path / "bad").exists() and not (tmp_path / "inner").exists()
    make_model("llama").save_pretrained(tmp_path / "float")  # the class's method is untouched
    assert (tmp_path / "float" / "config.json").exists()


def test_outside_the_tested_version_range_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(fqt.TESTED, "transformers", "<1")
    with pytest.raises(fq.UnsupportedError, match=r"transformers 5\.\S+ is outside the tested range <1"):
        fqt.quantize_model(make_model("llama"))


def test_import_fused_quant_imports_neither_this_integration_nor_transformers():
    code = ("import sys, fused_quant; bad = [m for m in ('transformers', 'compressed_tensors', "
            "'fused_quant.integrations.transformers') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "nemotron"])
def test_compiled_mlp_bitwise_equal_to_eager(arch):
    model = make_model(arch, torch.bfloat16)
    fqt.quantize_model(model)
    mlp = model.model.layers[0].mlp
    compiled = torch.compile(mlp, fullgraph=True)
    for tokens in (1, 7):
        x = torch.randn(2, tokens, 64, dtype=torch.bfloat16)
        with torch.no_grad():
            assert torch.equal(compiled(x), mlp(x))


def test_tested_range_is_the_extras_range():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    (extra,) = re.findall(r'^transformers = \[(.*)\]$', text, flags=re.M)
    for package, spec in fqt.TESTED.items():
        (pinned,) = re.findall(rf'"{package}([^"]*)"', extra)
        assert pinned == spec, (package, pinned, spec)


def test_gpu_wheels_are_inside_the_tested_range():
    """ci/gpu_wheels.txt (the wheels carried to a GPU node without a package index) pins versions the
    integration accepts, so the GPU rows test what the extra installs."""
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    lines = (Path(__file__).resolve().parents[2] / "ci" / "gpu_wheels.txt").read_text().splitlines()
    pins = {(r := Requirement(line)).name: next(iter(r.specifier)).version
            for line in lines if line.strip() and not line.startswith("#")}
    for package, spec in fqt.TESTED.items():
        assert package in pins, f"ci/gpu_wheels.txt has no {package}"
        assert pins[package] in SpecifierSet(spec), (package, pins[package], spec)


def test_copied_or_loaded_projections_merge_by_their_scheme():
    """gate_proj and up_proj of one key, one deep-copied and one saved and loaded whole: merged (they were refused
    as of two schemes, the message naming the same one twice, where keys were compared by identity)."""
    import copy
    import io

    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    mlp = LlamaMLP(LlamaConfig(hidden_size=32, intermediate_size=64)).to(torch.bfloat16)
    key = fq.kInt8DynamicTokenSym
    gate, up = fq.QuantLinear.from_float(mlp.gate_proj, key), fq.QuantLinear.from_float(mlp.up_proj, key)
    mlp.gate_proj = copy.deepcopy(gate)
    buf = io.BytesIO()
    torch.save(up, buf)
    buf.seek(0)
    mlp.up_proj = torch.load(buf, weights_only=False)
    merged = fqt.QuantGatedMLP.from_hf(mlp, key, "mlp")
    x = torch.randn(3, 32, dtype=torch.bfloat16)
    assert torch.equal(merged.gate_up_proj(x), torch.cat([gate(x), up(x)], dim=-1))


def test_mlp_modules_check_their_parts_where_they_are_built():
    """``QuantGatedMLP`` / ``QuantMLP`` refuse a part that is no QuantLinear, an activation that is no module, a
    ``fuse`` that is no bool and an unknown numerics profile where they are built (a ``None`` down_proj failed at the
    first forward with "'NoneType' object is not callable", a bad profile there too)."""
    lin = fq.QuantLinear.from_float(nn.Linear(16, 32), fq.kInt8DynamicTokenSym)
    down = fq.QuantLinear.from_float(nn.Linear(16, 16), fq.kInt8DynamicTokenSym)
    with pytest.raises(TypeError, match="QuantGatedMLP: down_proj must be a fused_quant.QuantLinear, got NoneType"):
        fqt.QuantGatedMLP(lin, None, fq.SiluAndMul())
    with pytest.raises(TypeError, match="QuantMLP: up_proj must be a fused_quant.QuantLinear, got Linear"):
        fqt.QuantMLP(nn.Linear(16, 16), down, fq.ReLUSquared())
    with pytest.raises(TypeError, match="QuantGatedMLP: act_fn must be the activation module .* got str 'silu'"):
        fqt.QuantGatedMLP(lin, down, "silu")
    with pytest.raises(TypeError, match="QuantGatedMLP: fuse must be True or False, got int 1"):
        fqt.QuantGatedMLP(lin, down, fq.SiluAndMul(), fuse=1)
    with pytest.raises(ValueError, match="fast"):
        fqt.QuantGatedMLP(lin, down, fq.SiluAndMul(), numerics="fast")
    mlp = fqt.QuantGatedMLP(lin, down, fq.SiluAndMul(), numerics="hcu")
    assert mlp(torch.randn(2, 16)).shape == (2, 16)
