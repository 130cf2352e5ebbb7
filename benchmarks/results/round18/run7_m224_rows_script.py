"""Round 18: int8 gate_up / down at M = 224 against M = 256 whose last 32 rows are copies of row 0 (what the
kernel reads past M), zeros, or random: is the time M's or the data's?"""
import torch
from benchmarks.decode import copies_for, _weights
from benchmarks.timing import graph_us
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

for label, (n, k) in (("gate_up", (28672, 4096)), ("down", (4096, 14336))):
    weights = _weights("int8", n, k, copies_for(n * k), torch.float8_e4m3fn)
    base = torch.randint(-127, 128, (256, k), dtype=torch.int8, device="cuda")
    xs = torch.rand(256, 1, device="cuda") * 0.01 + 1e-3
    cases = {"M=224": base[:224].contiguous(), "M=256 rows0": torch.cat([base[:224], base[:1].expand(32, k)]),
             "M=256 zeros": torch.cat([base[:224], torch.zeros(32, k, dtype=torch.int8, device="cuda")]),
             "M=256 random": base}
    line = label
    for name, xq in cases.items():
        m = xq.shape[0]
        p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, xq.device, True, True, False)
        calls = [g.bind_small_m(p, w, ws, None) for w, ws in weights]
        line += f" | {name} {graph_us([lambda c=c, xq=xq, s=xs[:m]: c(xq, s) for c in calls]):6.1f}"
    print(line, flush=True)
    del weights
