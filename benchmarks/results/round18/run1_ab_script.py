"""Round 18 A/B: the Llama-3-8B MLP replayed from a CUDA graph with the table before this round (no stream-K
configs) and after the stream-K sweep of gate_up and down at M = 128 / 256, in turns (the
second reversed); output bits compared between the two tables per key and M."""
import statistics, sys, torch
from pathlib import Path
import fused_quant
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g
from benchmarks.decode import _mlp, MLP_KEYS
from benchmarks.timing import graph_us

TABLES = {"old": Path(sys.argv[1]), "new": g.SMALL_M_CONFIG_FILE}
MS = (64, 128, 256)
torch.manual_seed(0)
peers = {"bf16": _mlp(None, 4096, 14336, 2), **{name: _mlp(key, 4096, 14336, 2) for name, key in MLP_KEYS.items()}}
xs = {m: torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16) for m in MS}
times = {(t, m, p): [] for t in TABLES for m in MS for p in peers}
outs = {}
for turn in range(2):
    for table in (list(TABLES) if turn == 0 else list(reversed(TABLES))):
        g.SMALL_M_CONFIG_FILE = TABLES[table]
        fused_quant.reset()
        for m in MS:
            for name, fns in peers.items():
                if name == "bf16" and table == "new":
                    continue
                x = xs[m]
                if turn == 0:
                    outs[(table, m, name)] = fns[0](x).clone()
                times[(table, m, name)].append(graph_us([lambda f=f: f(x) for f in fns]))
print(torch.cuda.get_device_name(), torch.__version__)
print("M | bf16 | old: fp8_static fp8_token int8_token | new: same | x bf16 old -> new | new bits == old")
for m in MS:
    bf = statistics.mean(times[("old", m, "bf16")])
    line = f"{m:4d} | {bf:7.2f}"
    for t in TABLES:
        line += " | " + " ".join(f"{statistics.mean(times[(t, m, p)]):7.2f}" for p in MLP_KEYS)
    line += " | " + " ".join(f"{bf / statistics.mean(times[('old', m, p)]):.2f}->{bf / statistics.mean(times[('new', m, p)]):.2f}"
                             for p in MLP_KEYS)
    line += " | " + " ".join(str(torch.equal(outs[("old", m, p)], outs[("new", m, p)])) for p in MLP_KEYS)
    print(line, flush=True)
print("raw turns:", {f"{k[0]} {k[1]} {k[2]}": [round(v, 2) for v in vs] for k, vs in times.items() if vs})
