"""Round 18: the int8 per-token MLP's pieces at M = 224 and 256, each replayed alone from a CUDA graph (no PDL
overlap between pieces): gate_up and down GEMMs (the chain's provider, bound), the two producers, the MLP."""
import torch
from benchmarks.decode import _mlp, MLP_KEYS, copies_for, _weights
from benchmarks.timing import graph_us
from fused_quant import keys as K
from fused_quant.gemm import GemmProblem, select_gemm_provider
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels.launch import launch_act_quant

FP8 = torch.float8_e4m3fn
mlps = _mlp(MLP_KEYS["int8_token"], 4096, 14336, 2)
for m in (224, 256):
    line = f"int8_token M={m}:"
    for label, (n, k) in (("gate_up", (28672, 4096)), ("down", (4096, 14336))):
        weights = _weights("int8", n, k, copies_for(n * k), FP8)
        xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
        xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
        p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, xq.device, True, True, False)
        prov = select_gemm_provider(p)[0]
        calls = [g.bind_small_m(p, w, ws, None) for w, ws in weights]
        line += f" {label} {graph_us([lambda c=c: c(xq, xs) for c in calls]):6.1f} ({prov.name})"
        del weights
    for act, d in (("identity", 4096), ("silu_and_mul", 2 * 14336)):
        xs_ = [torch.randn(m, d, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        line += f" | {act} {graph_us([lambda x=x: launch_act_quant(x, act, K.kInt8DynamicTokenSym, None, False, FP8) for x in xs_]):5.1f}"
    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    line += f" | mlp {graph_us([lambda f=f: f(x) for f in mlps]):6.1f}"
    print(line, flush=True)
