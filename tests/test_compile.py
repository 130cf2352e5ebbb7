"""torch.compile on the torch backend: an MLP calling maybe_fused_act_quant and QuantLinear
compiles once (fullgraph, dynamic) across token counts and is bitwise equal to eager. The
producers and the checked GEMM entry are opaque custom ops, so Inductor cannot re-round them."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from fused_quant import QuantLinear, ShapeMismatchError, SiluAndMul, maybe_fused_act_quant
from fused_quant import keys as K
from tests.helpers import assert_bits_equal, compile_counting, compiled_frames, graphs_summary

pytestmark = pytest.mark.slow


class MLP(nn.Module):
    def __init__(self, key, scale=None):
        super().__init__()
        torch.manual_seed(0)
        self.gate_up = QuantLinear.from_float(nn.Linear(64, 256).to(torch.bfloat16), key, scale, name="gate_up")
        self.down = QuantLinear.from_float(nn.Linear(128, 64).to(torch.bfloat16), key, scale, name="down")
        self.act = SiluAndMul()

    def forward(self, x):
        return self.down(maybe_fused_act_quant(self.act, self.gate_up(x), self.down))


@pytest.mark.parametrize("key_name", ["int8_dynamic_token", "fp8_static_tensor"])
def test_compile_once_across_token_counts_bitwise(key_name, backend_env):
    backend_env("torch")
    key = K.KEYS[key_name]
    mlp = MLP(key, 0.05 if K.is_static(key) else None)
    compiled, graphs = compile_counting(mlp, fullgraph=True, dynamic=True)
    for m in (17, 31, 63):
        x = torch.randn(m, 64).to(torch.bfloat16)
        assert_bits_equal(compiled(x), mlp(x), f"M={m}")
    assert len(graphs) == 1, f"compiled {len(graphs)} times:\n{graphs_summary(graphs)}"
    assert compiled_frames(graphs, MLP.forward) == graphs, graphs_summary(graphs)
    names = {n.target.__name__ if hasattr(n.target, "__name__") else str(n.target)
             for g in graphs for n in g.graph.nodes if n.op == "call_function"}
    assert any("quant_gemm" in n for n in names) and any("act_quant" in n for n in names), names


def _supported_anywhere(x, scale, *, why=""):
    return True, why


def test_compile_through_producers_whose_functions_are_partials(backend_env, monkeypatch):
    """The Triton backends register ``functools.partial`` producers and predicates; Dynamo cannot
    ``str()`` a partial, so nothing a traced check does may format a producer's label before it fails."""
    import functools

    from fused_quant import registry

    backend_env("torch")
    table = {pair: p._replace(fn=functools.partial(p.fn), supported=functools.partial(_supported_anywhere))
             for pair, p in registry._PRODUCERS["torch"].items()}
    monkeypatch.setitem(registry._PRODUCERS, "torch", table)
    mlp = MLP(K.kInt8DynamicTokenSym)
    compiled, graphs = compile_counting(mlp, fullgraph=True, dynamic=True)
    x = torch.randn(9, 64).to(torch.bfloat16)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = compiled(x)
    assert_bits_equal(out, mlp(x), "partial producers")
    assert len(graphs) == 1
    # nothing of ours makes Dynamo warn (it did about an lru_cache around the activation-name lookup)
    ours = [str(w.message) for w in seen if "fused_quant" in str(w.message) or "registry.py" in str(w.message)
            or "fused_quant" in (w.filename or "")]
    assert not ours, ours


@pytest.mark.parametrize("key_name", ["int8_dynamic_token", "fp8_static_tensor"])
def test_cpu_model_on_a_gpu_node_compiles_bitwise(key_name, monkeypatch):
    """A CPU model where a GPU backend is selected (its producers decline CPU tensors): the torch backend's
    producer computes the activation, so the compiled MLP keeps eager's bits. With the plain activation left to
    the consumer's quantizer, Inductor fused silu and mul without eager's bf16 rounding between them (one code
    apart in the output)."""
    from fused_quant import fusion_counts, reset_fusion_counts, selection

    monkeypatch.setattr(selection, "select_backend", lambda info, env="auto": ("triton_fp8", "a GPU node"))
    key = K.KEYS[key_name]
    mlp = MLP(key, 0.05 if K.is_static(key) else None)
    compiled = torch.compile(mlp, fullgraph=True)
    for m in (1, 7):
        x = torch.randn(2, m, 64).to(torch.bfloat16)
        assert_bits_equal(compiled(x), mlp(x), f"M={m}")
    assert selection.current_backend_name() == "triton_fp8"
    reset_fusion_counts()
    mlp(torch.randn(3, 64).to(torch.bfloat16))
    assert ("torch", "silu_and_mul", key_name) in fusion_counts(), fusion_counts()


def test_a_compiled_function_keeps_its_traced_settings_until_torch_compiler_reset(monkeypatch):
    """The numerics profile is a constant of a traced graph: after FUSED_QUANT_NUMERICS changes and
    fused_quant.reset(), eager calls use the new profile and a compiled function the one it was traced with,
    until torch.compiler.reset() has it trace again (README, fused_quant.reset())."""
    import fused_quant
    from fused_quant import fused_act_quant

    monkeypatch.delenv("FUSED_QUANT_NUMERICS", raising=False)
    fused_quant.reset()
    torch.manual_seed(0)
    down = QuantLinear.from_float(nn.Linear(128, 16).to(torch.bfloat16), K.kInt8DynamicTokenSym, name="down")
    act, x = SiluAndMul(), torch.randn(64, 256).to(torch.bfloat16) * 4
    hcu = fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym, numerics="hcu").data
    default = fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym, numerics="default").data
    assert not torch.equal(hcu, default)  # the two profiles differ on these values
    torch.compiler.reset()
    compiled = torch.compile(lambda x: maybe_fused_act_quant(act, x, down), backend="eager", fullgraph=True)
    with torch.no_grad():
        assert torch.equal(compiled(x).data, default)
        monkeypatch.setenv("FUSED_QUANT_NUMERICS", "hcu")
        fused_quant.reset()
        assert torch.equal(maybe_fused_act_quant(act, x, down).data, hcu)  # eager: the new profile
        assert torch.equal(compiled(x).data, default)  # traced with the default: kept
        torch.compiler.reset()
        assert torch.equal(compiled(x).data, hcu)  # traced again
    fused_quant.reset()


_WRONG_K = "quant_gemm: expected K=128 \\(weight \\[N=64, K=128\\]\\) but received K=100"


def test_a_refusal_under_fullgraph_compile_keeps_its_message():
    """A check that refuses under ``torch.compile(fullgraph=True)`` surfaces as torch's own error (a raise ends the
    graph); its message still names the two Ks (not the layer: its name is no constant of a compiled graph)."""
    torch._dynamo.reset()
    down = QuantLinear.from_float(nn.Linear(128, 64).to(torch.bfloat16), K.kInt8DynamicTokenSym, name="down")
    compiled = torch.compile(lambda t: down(t), fullgraph=True)
    with torch.no_grad(), pytest.raises(Exception, match=_WRONG_K):
        compiled(torch.randn(4, 100, dtype=torch.bfloat16))


@pytest.mark.parametrize("form", ["tensor", "QuantizedActivation", "pair", "quant_gemm"])
def test_a_refusal_under_compile_without_fullgraph_is_the_package_error(form):
    """Without ``fullgraph`` a refusal is raised as itself (README's Errors), whatever form the input takes: a
    quantized input's K was checked only in the GEMM op's fake implementation, whose error torch wrapped in its
    own ``TorchRuntimeError`` (neither a ShapeMismatchError nor a ValueError)."""
    from fused_quant import fused_act_quant, quant_gemm

    torch._dynamo.reset()
    down = QuantLinear.from_float(nn.Linear(128, 64).to(torch.bfloat16), K.kInt8DynamicTokenSym, name="down")
    x = torch.randn(4, 100, dtype=torch.bfloat16)
    qa = fused_act_quant("identity", x, K.kInt8DynamicTokenSym)
    call = {"tensor": lambda: down(x), "QuantizedActivation": lambda: down(qa),
            "pair": lambda: down(None, (qa.data, qa.scale)),
            "quant_gemm": lambda: quant_gemm(qa, down.weight, down.weight_scale, out_dtype=torch.bfloat16)}[form]
    compiled = torch.compile(call, backend="aot_eager")
    with torch.no_grad(), pytest.raises(ShapeMismatchError, match=_WRONG_K):
        compiled()
    with torch.no_grad(), pytest.raises(ShapeMismatchError, match="down: expected K=128" if form != "quant_gemm"
                                        else _WRONG_K):
        call()  # the eager call names the layer


def test_layers_compiled_one_by_one_share_one_graph_whatever_their_names():
    """Each block of a model compiled on its own (``torch.compile(block)``, regional compilation): the layer's name,
    read on every call and handed to the GEMM op, was a guard, so each block of one shape compiled again, and from
    the ninth on torch's recompile limit ran them eager (or failed under ``fullgraph``)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    blocks = [MLP(K.kInt8DynamicTokenSym) for _ in range(10)]
    for i, block in enumerate(blocks):
        block.gate_up.name, block.down.name = f"layers.{i}.mlp.gate_up_proj", f"layers.{i}.mlp.down_proj"
    x = torch.randn(5, 64).to(torch.bfloat16)
    with torch.no_grad():
        eager = x
        for block in blocks:
            eager = block(eager)
        for block in blocks:
            x = torch.compile(block, backend=backend, fullgraph=True)(x)
    assert_bits_equal(x, eager, "ten blocks")
    assert len(graphs) == 1, f"compiled {len(graphs)} times"


def test_a_compiled_gemm_picks_its_provider_when_it_runs(monkeypatch):
    """README: the GEMM op chooses its provider at run time, so FUSED_QUANT_DISABLED_GEMMS changed and reset()
    reach a compiled function without torch.compiler.reset() (README said it kept the traced ones)."""
    import fused_quant
    from fused_quant import register_gemm_provider, unregister_gemm_provider
    from fused_quant.backends.fallback.gemms import _int8_exact

    monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS", raising=False)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "torch")
    fused_quant.reset()
    torch.manual_seed(0)
    layer = QuantLinear.from_float(nn.Linear(64, 48).to(torch.bfloat16), K.kInt8DynamicTokenSym, name="L")
    x = torch.randn(5, 64).to(torch.bfloat16)
    calls = []

    def spy(*args):
        calls.append(1)
        return _int8_exact(*args)

    register_gemm_provider("spy_int8", spy, kind="int8", backends=("torch",))
    try:
        torch._dynamo.reset()
        compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
        with torch.no_grad():
            expected = compiled(x)
            assert len(calls) == 1
            monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "spy_int8")
            fused_quant.reset()
            assert_bits_equal(compiled(x), expected, "the chain's next exact provider")
            assert len(calls) == 1  # disabled at run time, with no torch.compiler.reset()
    finally:
        unregister_gemm_provider("spy_int8")
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fused_quant.reset()
