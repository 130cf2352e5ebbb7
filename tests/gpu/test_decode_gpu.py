"""GPU rows, decode sizes: the MLP (producers, bound QuantLinears, the small-M GEMMs among the
providers) replays bitwise equal to eager from a manual ``torch.cuda.graph`` capture and under
``torch.compile(mode="reduce-overhead", fullgraph=True)``, for every key, on both Triton backends."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

from fused_quant import QuantLinear, SiluAndMul, maybe_fused_act_quant
from fused_quant import keys as K
from fused_quant.gemm import GemmProblem, select_gemm_provider
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
        eager = mlp(x)
        assert_bits_equal(mlp(x), eager, f"bound eager call M={m}")
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
    assert any(name.startswith("small_m") for name in used), f"no small-M GEMM among the providers used: {used}"
