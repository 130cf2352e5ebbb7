"""GPU rows, decode sizes: the MLP (producers, bound QuantLinears, the small-M GEMMs among the
providers) replays bitwise equal to eager from a manual ``torch.cuda.graph`` capture and under
``torch.compile(mode="reduce-overhead", fullgraph=True)``, for every key, on both Triton backends."""

from __future__ import annotations

import re

import pytest
import torch
import torch._dynamo
from torch import nn

from fused_quant import QuantLinear, SiluAndMul, linear_act_quant, maybe_fused_act_quant
from fused_quant import keys as K
from fused_quant.gemm import GemmProblem, select_gemm_provider
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels import launch
from tests.helpers import assert_bits_equal, capture_graph

pytestmark = pytest.mark.gpu

BACKENDS = [pytest.param("triton_fp8", marks=pytest.mark.triton_fp8),
            pytest.param("hip_w8a8", marks=pytest.mark.hip_w8a8)]
CUDA = torch.device("cuda")
D, H = 4096, 14336  # Llama-3-8B's MLP: the shapes the small-M configs were swept for


class MLP(nn.Module):
    def __init__(self, key):
        super().__init__()
        torch.manual_seed(0)
        scale = 0.05 if K.is_static(key) else None
        self.gate_up = QuantLinear.from_float(nn.Linear(D, 2 * H, bias=False, device=CUDA, dtype=torch.bfloat16),
                                              key, scale, name="gate_up")
        self.down = QuantLinear.from_float(nn.Linear(H, D, bias=False, device=CUDA, dtype=torch.bfloat16),
                                           key, scale, name="down")
        self.act = SiluAndMul()

    def forward(self, x):
        return self.down(maybe_fused_act_quant(self.act, self.gate_up(x), self.down))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_dynamic_token"])
def test_mlp_compiled_before_any_eager_call(backend, key_name, backend_env):
    """torch.compile(mode="reduce-overhead") of an MLP never called eagerly (nothing bound: its split-K
    down GEMM takes the custom op's unbound calls, which keep no counters that its CUDA-graph trees would
    refuse) replays the bits of the eager calls after it, the bound ones' single-launch split-K included. At
    M = 64 / 256 FP8 static's down takes ``torch._scaled_mm``'s fp32 way (the H200's table), whose unbound calls
    make their unit scale per call: none may outlive a call in the trees' pool."""
    backend_env(backend)
    torch._dynamo.reset()
    mlp = MLP(K.KEYS[key_name])
    compiled = torch.compile(mlp, mode="reduce-overhead", fullgraph=True, dynamic=False)
    for m in (1, 16, 64, 256):
        x = torch.randn(m, D, device=CUDA, dtype=torch.bfloat16)
        for _ in range(3):  # warm-up, recording, replays
            got = compiled(x).clone()
        for i in range(2):  # checked, then bound
            assert_bits_equal(mlp(x), got, f"{key_name} eager call {i} after torch.compile M={m}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "fp8_dynamic_token", "int8_static_tensor",
                                      "int8_dynamic_token"])
def test_mlp_graph_and_compiled_replay_bitwise_eager(backend, key_name, backend_env):
    backend_env(backend)
    torch._dynamo.reset()  # each parameter's MLP compiles afresh (the limit counts recompiles of forward's code)
    key = K.KEYS[key_name]
    mlp = MLP(key)
    compiled = torch.compile(mlp, mode="reduce-overhead", fullgraph=True, dynamic=False)
    used = set()
    for m in (1, 16, 64):
        x = torch.randn(m, D, device=CUDA, dtype=torch.bfloat16)
        eager = mlp(x)  # checked calls: the producers, then the GEMMs
        assert_bits_equal(mlp(x), eager, f"bound eager call M={m}")  # gate_up's GEMM quantizing x where it can
        graph, out = capture_graph(mlp, x)
        for _ in range(2):
            graph.replay()
            torch.cuda.synchronize()
            assert_bits_equal(out, eager, f"{key_name} manual graph replay M={m}")
        x_new = torch.randn_like(x)
        x.copy_(x_new)
        graph.replay()
        assert_bits_equal(out, mlp(x_new), f"{key_name} replay after an in-place input update M={m}")
        for _ in range(3):  # warm-up, recording, replays
            got = compiled(x_new).clone()
        assert_bits_equal(got, mlp(x_new), f"{key_name} torch.compile reduce-overhead M={m}")
        kind = "fp8" if K.is_fp8(key) else "int8"
        for n, k in ((2 * H, D), (D, H)):
            p = GemmProblem(m, n, k, kind, mlp.down.weight.dtype, torch.bfloat16, CUDA, K.is_per_token(key), True,
                            False)
            used.add(select_gemm_provider(p)[0].name)
        p_gate_up = GemmProblem(m, 2 * H, D, kind, mlp.down.weight.dtype, torch.bfloat16, CUDA, K.is_per_token(key),
                                True, False)
        gate_up = select_gemm_provider(p_gate_up)[0].name
        # eager calls quantize x in gate_up's small-M GEMM where its table row does (``quantizes_float_input``: one
        # block of at most 16 tokens; the provider's predicate decided whether the small-M GEMM runs)
        arch = launch._cuda_arch(torch.cuda.current_device())
        cfg = g.small_m_config(arch, kind, 2 * H, D, m, (), g._device_model(CUDA))[0]
        want = gate_up.startswith("small_m") and g.quantizes_float_input(cfg, m, kind)
        bound = [b.gemm for b in mlp.gate_up._bound.values() if b.gemm.problem.m == m]
        assert [b.from_float is not None for b in bound] == [want], (m, gate_up, bound)
        # and under capture too (the graphs above replayed it) for a per-tensor key at a few tokens, one split
        captured = (want and not K.is_per_token(key) and m <= g.QUANTIZING_CAPTURED_MAX_M
                    and cfg["splits"] == 1)
        assert [b.float_captured for b in bound] == [captured], (m, gate_up)
    assert any(name.startswith("small_m") for name in used), f"no small-M GEMM among the providers used: {used}"


def _launch_pdl_flags() -> set:
    """(``launch_pdl``, whether its PTX waits on the grid before) of every kernel compiled for a direct
    launch in this runtime state."""
    from fused_quant.kernels import launch

    return {(bool(c.metadata.launch_pdl), "griddepcontrol.wait" in c.asm["ptx"])
            for c in launch._COMPILED._data.values()}


# wait first; the others launch first
GEMM_KERNELS = {"small_m_gemm_kernel", "scaled_int8_gemm_kernel", "scaled_int8_gemm_tma_kernel"}


def _prefetching_kernels() -> int:
    """How many kernels compiled in this runtime state prefetch into L2 before their grid dependency wait.
    Checks that no kernel loads or stores global memory before its wait, that only GEMMs prefetch, and
    that GEMMs wait before letting the next kernel launch, the others (producers, the split-K epilogue)
    after."""
    from fused_quant.kernels import launch

    n = 0
    for c in launch._COMPILED._data.values():
        ptx = c.asm["ptx"]
        if "griddepcontrol.wait" not in ptx:
            continue
        gemm, wait = c.name in GEMM_KERNELS, ptx.index("griddepcontrol.wait")
        # plain loads and stores, atomics, and asynchronous copies (cp.async, the TMA's cp.async.bulk.tensor)
        assert not re.search(r"\b(?:ld|st|atom|red)\.global|\bcp\.async", ptx[:wait]), \
            f"{c.name} accesses memory before its wait"
        assert (wait < ptx.index("griddepcontrol.launch_dependents")) == gemm, c.name
        if "prefetch.global.L2" in ptx:
            assert gemm and ptx.index("prefetch.global.L2") < wait, c.name
            n += 1
    return n


def _mlp_chain(mlp, x, steps: int) -> list:
    """``steps`` MLP calls back to back, each on the one before's output (every kernel boundary,
    within one MLP and between two, is a dependency)."""
    outs = []
    for _ in range(steps):
        x = mlp(x)
        outs.append(x)
    return outs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "fp8_dynamic_token", "int8_dynamic_token"])
def test_pdl_launches_bitwise_equal_plain_launches(backend, key_name, backend_env, monkeypatch):
    """Programmatic dependent launch (on by default on SM90+) changes when kernels are scheduled, not
    what they compute: eager and graph-replayed MLP chains give the bits of plain launches
    (``FUSED_QUANT_PDL=off``), at the decode sizes where kernels are short and overlap most."""
    import fused_quant
    from fused_quant.kernels import direct_launch, launch

    monkeypatch.delenv("FUSED_QUANT_PDL", raising=False)
    fused_quant.reset()
    if not (launch.pdl_options(torch.cuda.current_device())["PDL"] and direct_launch.version_ok()):
        pytest.skip("needs programmatic dependent launch (NVIDIA SM90+, a Triton with launch_pdl) and the "
                    "direct launch (whose compiled kernels this test reads)")
    backend_env(backend)
    mlp = MLP(K.KEYS[key_name])
    results = {}
    for pdl in ("on", "off"):
        monkeypatch.setenv("FUSED_QUANT_PDL", pdl)
        fused_quant.reset()
        for m in (1, 16, 64, 256):
            x = torch.randn(m, D, device=CUDA, generator=torch.Generator(CUDA).manual_seed(m), dtype=torch.bfloat16)
            eager = [y.clone() for y in _mlp_chain(mlp, x, 8)]
            graph, outs = capture_graph(_mlp_chain, mlp, x, 8)
            replays = []
            for _ in range(3):
                graph.replay()
                replays.append([y.clone() for y in outs])
            torch.cuda.synchronize()
            results[pdl, m] = (eager, replays)
        assert _launch_pdl_flags() == {(pdl == "on",) * 2}, f"FUSED_QUANT_PDL={pdl}: compiled kernels' launch_pdl"
        assert (_prefetching_kernels() > 0) == (pdl == "on"), f"FUSED_QUANT_PDL={pdl}: the small-M GEMM's L2 prefetch"
    for m in (1, 16, 64, 256):
        (eager_on, replays_on), (eager_off, replays_off) = results["on", m], results["off", m]
        for i, want in enumerate(eager_off):
            assert_bits_equal(eager_on[i], want, f"{key_name} M={m} eager call {i}: PDL vs plain")
            for r in (*replays_on, *replays_off):
                assert_bits_equal(r[i], want, f"{key_name} M={m} graph replay call {i} vs plain eager")


class OneKernelMLP(MLP):
    """The MLP with gate_up's call and the silu producer as ``linear_act_quant``."""

    def forward(self, x):
        return self.down(linear_act_quant(self.gate_up, x, self.act, self.down))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_static_tensor", "int8_dynamic_token"])
def test_linear_act_quant_mlp_is_the_two_calls_bit_for_bit(backend, key_name, backend_env):
    """``linear_act_quant`` gives the bits of gate_up's call then ``maybe_fused_act_quant``: in eager calls (the
    first two compose them, later ones run gate_up's GEMM with the producer in its epilogue where its config
    has one split and the key is per-tensor), replayed from a manual graph capture and under torch.compile;
    the producer is counted once per call either way. A per-token key keeps the two calls."""
    from fused_quant import fusion_counts, reset_fusion_counts

    backend_env(backend)
    torch._dynamo.reset()
    key = K.KEYS[key_name]
    two, one = MLP(key), OneKernelMLP(key)  # the same weights (seed 0)
    compiled = torch.compile(one, mode="reduce-overhead", fullgraph=True, dynamic=False)
    kind = "fp8" if K.is_fp8(key) else "int8"
    arch = launch._cuda_arch(torch.cuda.current_device())
    for m in (1, 4, 16, 32, 64, 160, 256):
        x = torch.randn(m, D, device=CUDA, dtype=torch.bfloat16)
        want = two(x)
        reset_fusion_counts()
        for i in range(4):
            assert_bits_equal(one(x), want, f"{key_name} eager call {i} M={m}")
        silu = {k: n for k, n in fusion_counts().items() if k[1] == "silu_and_mul"}
        assert sum(silu.values()) == 4, fusion_counts()
        p = GemmProblem(m, 2 * H, D, kind, one.down.weight.dtype, torch.bfloat16, CUDA, K.is_per_token(key), True,
                        False)
        cfg = g.small_m_config(arch, kind, 2 * H, D, m, (), g._device_model(CUDA))[0]
        fused = (not K.is_per_token(key) and select_gemm_provider(p)[0].name.startswith("small_m")
                 and g.one_split(cfg, D) == 1 and g.m_bucket(m) in g.PRODUCING_BUCKETS)
        bound = [b for b in one.gate_up._bound.values() if b.gemm.problem.m == m]
        assert [[p.call is not None for p in b.producing.values()] for b in bound] == [[fused]], (m, cfg)
        graph, out = capture_graph(one, x)
        x_new = torch.randn_like(x)
        x.copy_(x_new)
        graph.replay()
        assert_bits_equal(out, two(x_new), f"{key_name} graph replay after an in-place input update M={m}")
        for _ in range(3):
            got = compiled(x_new).clone()
        assert_bits_equal(got, two(x_new), f"{key_name} torch.compile reduce-overhead M={m}")


@pytest.mark.triton_fp8
def test_row_wise_call_follows_a_one_element_weight_scale_written_in_place(backend_env):
    """An FP8 layer with one weight scale and a per-token key above the small-M buckets runs ``torch._scaled_mm``
    row-wise, which takes the scale as a ``[1, N]`` copy: eager calls see a write into the layer's scale (the copy
    is made again by its version), and a captured graph copies the scale at each replay, so its replays see it
    too. Doubling the scale doubles the bf16 output exactly."""
    backend_env("triton_fp8")
    torch.manual_seed(0)
    n, k, m = 256, 512, 300
    w = (torch.randn(n, k, device=CUDA) * 0.1).to(torch.float8_e4m3fn)
    layer = QuantLinear(w, torch.tensor([0.02], device=CUDA), K.kFp8DynamicTokenSym, name="proj")
    x = torch.randn(m, k, device=CUDA, dtype=torch.bfloat16)
    with torch.no_grad():
        layer(x)
        first = layer(x).clone()
        (bound,) = layer._bound.values()
        assert bound.gemm.provider.name == "scaled_mm_fp8", bound.gemm.provider.name
        assert g.scaled_mm_way(bound.gemm.problem) == g.SCALED_MM_ROW_WISE
        layer.weight_scale.mul_(2)
        assert_bits_equal(layer(x), first * 2, "eager after a write")
        graph, out = capture_graph(layer, x)
        graph.replay()
        assert_bits_equal(out, first * 2, "replayed")
        layer.weight_scale.mul_(2)
        graph.replay()
        assert_bits_equal(out, first * 4, "replayed after a write")
        assert_bits_equal(layer(x), first * 4, "eager after the replays")
