"""GPU rows: consumer GEMMs against float64, the MLP under torch.compile (one compile across
token counts, bitwise equal to eager) and CUDA-graph replay after in-place input/scale updates."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import fused_quant
from fused_quant import QuantLinear, SiluAndMul, ReLUSquared, maybe_fused_act_quant
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.gemm import gemm_providers, quant_gemm
from fused_quant.registry import fusion_counts, fused_act_quant, reset_fusion_counts
from tests.helpers import (adversarial_rows, assert_bits_equal, assert_gemm_close, capture_graph, compile_counting,
                           compiled_frames, graphs_summary)

pytestmark = pytest.mark.gpu

BACKENDS = [pytest.param("triton_fp8", marks=pytest.mark.triton_fp8),
            pytest.param("hip_w8a8", marks=pytest.mark.hip_w8a8)]
CUDA = torch.device("cuda")


def _weights(n, k, wdtype, seed=0):
    """Random weights with a zero row (its scale 0: that output column is the bias alone)."""
    from fused_quant.reference import quantize_weight_ref

    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) / k**0.5
    w[n // 2] = 0
    wq, ws = quantize_weight_ref(w, wdtype)
    return wq.to(CUDA), ws.to(CUDA)


def _tokens(m, k, dtype, seed=0):
    """Random tokens with up to half the rows adversarial (zero, one huge value, NaN, +-Inf, denormals, +-max, -0)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(dtype)
    n = min(m // 2, 10)
    x[:n] = adversarial_rows(k, dtype, seed=seed)[:n]
    return x.to(CUDA)


# (M, N, K): M <= 16 and odd sizes select different providers / tiles; M = 300 / 700 / 2048 / 4100 reach the Triton
# int8 GEMM's large-M tiles: through tensor descriptors, at 700 with N and K off its blocks (K a multiple of 16), and
# through pointers at 4100 (K = 328 is not a multiple of 16)
SHAPES = [(1, 256, 512), (16, 384, 1024), (17, 4096, 4096), (300, 1024, 2048), (700, 1000, 1040), (2048, 512, 14336),
          (33, 72, 200), (4100, 200, 328)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("per_token", [True, False])
@pytest.mark.parametrize("bias", [False, True])
def test_every_provider_against_float64(backend, kind, out_dtype, per_token, bias, monkeypatch):
    providers = [p.name for p in gemm_providers(backend, kind)]
    assert providers, f"{backend} has no {kind} provider"
    key = {("int8", True): K.kInt8DynamicTokenSym, ("int8", False): K.kInt8StaticTensorSym,
           ("fp8", True): K.kFp8DynamicTokenSym, ("fp8", False): K.kFp8StaticTensorSym}[(kind, per_token)]
    wdtype = torch.int8 if kind == "int8" else torch.float8_e4m3fn
    ran, declined = set(), {}
    for name in providers:
        monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", ",".join(p for p in providers if p != name))
        fused_quant.reset()  # read once per runtime generation
        for m, n, k in SHAPES:
            wq, ws = _weights(n, k, wdtype, seed=m)
            x = _tokens(m, k, out_dtype, seed=m)
            qa = fused_act_quant("identity", x, key, torch.tensor([0.02], device=CUDA) if not per_token else None)
            b = (torch.randn(n, device=CUDA) * 0.1).to(out_dtype) if bias else None
            from fused_quant.gemm import GemmProblem, select_gemm_provider

            prob = GemmProblem(m, n, k, kind, qa.data.dtype, out_dtype, CUDA, per_token, True, bias)
            ok, why = next(p for p in gemm_providers(backend, kind) if p.name == name).check(prob)
            if not ok:
                declined.setdefault(name, []).append(f"{m}x{n}x{k}: {why}")
                continue
            assert select_gemm_provider(prob, backend)[0].name == name
            out = quant_gemm(qa, wq, ws, b, out_dtype=out_dtype, layer=f"{name} {m}x{n}x{k}", backend=backend)
            assert_gemm_close(out, qa.data, qa.scale, wq, ws, b, exact_acc=kind == "int8", what=f"{name} {m}x{n}x{k}")
            ran.add(name)
    monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
    fused_quant.reset()
    # every provider is tested on some shape; the vendor's only where its library is installed (ROCm / DCU nodes)
    untested = [name for name in providers if name not in ran and name != "hipblaslt_w8a8"]
    assert not untested, f"{backend} {kind}: {untested} accepted none of the shapes: {declined}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mnk", [(300, 1024, 2048), (700, 1000, 1040), (1024, 4096, 4096), (5000, 520, 1024)],
                         ids=str)
def test_int8_gemm_through_descriptors_equals_pointers_and_replays(backend, mnk, backend_env, monkeypatch):
    """Past 256 tokens the Triton int8 GEMM reads its tiles through tensor descriptors on this GPU (``tma_ok``): the
    same bits as the pointer kernel in the same tile (int8 sums are exact), as a CUDA graph's replays, and as the
    pointer kernel it takes for an activation not 16-byte aligned; within the float64 bound."""
    from fused_quant.gemm import GemmProblem
    from fused_quant.kernels import gemm_launch as g

    backend_env(backend)
    m, n, k = mnk
    wq, ws = _weights(n, k, torch.int8, seed=m)
    x = _tokens(m, k, torch.bfloat16, seed=m)
    qa = fused_act_quant("identity", x, K.kInt8DynamicTokenSym, None)
    p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, wq.device, True, True, False)  # its index set
    ok, why = g.tma_ok(p, wq)
    if not ok:  # ROCm, or a GPU before SM90: the pointer kernel only, tested against float64 above
        pytest.skip(f"no tensor descriptors here: {why}")
    assert g.int8_gemm_row(p)[-1] != "pointers"
    fused_quant.reset()
    launched, call = {}, g.KernelCall.__call__

    def counting(self, *args, **kwargs):
        launched[self.plan.variant] = launched.get(self.plan.variant, 0) + 1
        return call(self, *args, **kwargs)

    monkeypatch.setattr(g.KernelCall, "__call__", counting)
    described = g.bind_triton_int8(p, wq, ws, None)
    out = described(qa.data, qa.scale)
    assert launched == {"int8_gemm_tma": 1}, launched
    assert_gemm_close(out, qa.data, qa.scale, wq, ws, None, exact_acc=True, what=f"descriptors {mnk}")
    graph, replayed = capture_graph(described, qa.data, qa.scale)
    graph.replay()
    torch.cuda.synchronize()
    assert_bits_equal(replayed, out, f"graph replay {mnk}")
    shifted = torch.empty(m * k + 1, dtype=torch.int8, device=CUDA)[1:].view(m, k)
    shifted.copy_(qa.data)
    assert shifted.data_ptr() % 16
    assert_bits_equal(described(shifted, qa.scale), out, f"unaligned activation {mnk}")
    assert launched == {"int8_gemm_tma": 3, "int8_gemm": 1}, launched  # the replay launches nothing from the host
    rows = tuple((*r[:-1], "pointers") for r in g.int8_gemm_rows(torch.cuda.current_device()))
    monkeypatch.setattr(g, "int8_gemm_rows", lambda index: rows)
    fused_quant.reset()
    assert_bits_equal(g.bind_triton_int8(p, wq, ws, None)(qa.data, qa.scale), out, f"pointer kernel {mnk}")
    fused_quant.reset()


class MLP(nn.Module):
    def __init__(self, d, h, key, act, scale=None):
        super().__init__()
        torch.manual_seed(0)
        self.gate_up = QuantLinear.from_float(nn.Linear(d, 2 * h if act is SiluAndMul else h).to(torch.bfloat16),
                                              key, scale, name="gate_up")
        self.down = QuantLinear.from_float(nn.Linear(h, d).to(torch.bfloat16), key, scale, name="down")
        self.act = act()

    def forward(self, x):
        return self.down(maybe_fused_act_quant(self.act, self.gate_up(x), self.down))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_dynamic_token", "fp8_dynamic_token"])
def test_compile_once_across_token_counts_bitwise(backend, key_name, backend_env):
    backend_env(backend)
    key = K.KEYS[key_name]
    mlp = MLP(256, 512, key, SiluAndMul, 0.05 if K.is_static(key) else None).to(CUDA)
    cmlp, compiles = compile_counting(mlp, fullgraph=True, dynamic=True)
    reset_fusion_counts()
    for m in (17, 31, 63):
        x = torch.randn(m, 256, device=CUDA).to(torch.bfloat16)
        assert_bits_equal(cmlp(x), mlp(x), f"compiled vs eager M={m}")
    summary = graphs_summary(compiles)
    assert len(compiles) == 1, f"compiled {len(compiles)} times for M in (17, 31, 63):\n{summary}"
    assert compiled_frames(compiles, MLP.forward) == compiles, summary
    assert fusion_counts().get((backend, "silu_and_mul", key_name)) == 3  # the eager calls fused too


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_static_tensor", "int8_dynamic_token"])
@pytest.mark.parametrize("m", [1, 4, 64])  # 1 and 4: a static key's GEMM may quantize x under capture too
def test_cuda_graph_replay_sees_inplace_input_and_scale(backend, key_name, m, backend_env):
    backend_env(backend)
    key = K.KEYS[key_name]
    static = K.is_static(key)
    mlp = MLP(256, 512, key, ReLUSquared, 0.05 if static else None).to(CUDA)
    x = torch.randn(m, 256, device=CUDA).to(torch.bfloat16)
    mlp(x)  # warm-up: compile kernels outside capture
    graph, y = capture_graph(mlp, x)
    x.copy_(torch.randn_like(x) * 2)
    if static:
        mlp.down.input_scale.copy_(torch.tensor([0.11], device=CUDA))
        mlp.gate_up.input_scale.copy_(torch.tensor([0.07], device=CUDA))
    graph.replay()
    assert_bits_equal(y, mlp(x.clone()), "replay vs eager after in-place updates")


@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_tensor_is_quantized_by_the_backend_kernel(backend, backend_env):
    backend_env(backend)
    layer = QuantLinear.from_float(nn.Linear(512, 256).to(torch.bfloat16), K.kInt8DynamicTokenSym).to(CUDA)
    reset_fusion_counts()
    x = torch.randn(40, 512, device=CUDA).to(torch.bfloat16)
    out = layer(x)
    assert fusion_counts() == {(backend, "identity", "int8_dynamic_token"): 1}
    qa = fused_act_quant("identity", x, K.kInt8DynamicTokenSym, backend="torch")
    assert isinstance(qa, QuantizedActivation)
    assert_gemm_close(out, qa.data, qa.scale, layer.weight, layer.weight_scale, layer.bias, exact_acc=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_leaves_every_key_bitwise(backend, backend_env):
    """A torch.autocast region around the layers changes no bit: the GEMMs accumulate as they do outside it (the torch
    backend's fp32 matmul ran in fp16 / bf16 there) at small and large M, checked and bound calls."""
    backend_env(backend)
    for key in (K.kFp8StaticTensorSym, K.kFp8DynamicTokenSym, K.kInt8StaticTensorSym, K.kInt8DynamicTokenSym):
        scale = 0.05 if K.is_static(key) else None
        layer = QuantLinear.from_float(nn.Linear(512, 256).to(torch.bfloat16), key, scale).to(CUDA)
        for m in (1, 16, 300):
            x = _tokens(m, 512, torch.bfloat16, seed=m)
            with torch.no_grad():
                want = layer(x)
                for dtype in (torch.float16, torch.bfloat16):
                    fresh = copy.deepcopy(layer)  # no bound calls: its first call takes the checked path
                    with torch.autocast("cuda", dtype=dtype):
                        for call in ("checked", "bound"):
                            assert_bits_equal(fresh(x), want, f"{K.key_name(key)} M={m} {dtype} {call} call")
