"""Nineteenth round: the eager MLP at M = 32 / 48 / 64 / 100 (bench mlp's M = 48 eager column was 0.77-1.02x bf16,
its M = 64 one 1.36-1.73x); two turns; then a profile of 20 eager calls per key at M = 48 and 64."""
import torch
from torch.profiler import profile, ProfilerActivity
from benchmarks.decode import _mlp, MLP_KEYS
from benchmarks.timing import loop_us, graph_us

torch.manual_seed(0)
peers = {"bf16": _mlp(None, 4096, 14336, 2), **{n: _mlp(k, 4096, 14336, 2) for n, k in MLP_KEYS.items()}}
for turn in range(2):
    for m in (32, 48, 64, 100):
        x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        e = loop_us({n: (lambda f=fns[0]: f(x)) for n, fns in peers.items()}, target_ms=20, rounds=3)
        g = {n: graph_us([lambda f=f: f(x) for f in fns]) for n, fns in peers.items()}
        print(f"turn {turn} M={m:4d} " + " ".join(f"{n} eager {e[n]:7.1f} graph {g[n]:6.1f}" for n in peers), flush=True)
for m in (48, 64):
    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    for n, fns in peers.items():
        f = fns[0]
        for _ in range(5):
            f(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                f(x)
            torch.cuda.synchronize()
        print(f"== profile M={m} {n}", flush=True)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8, max_name_column_width=60))
