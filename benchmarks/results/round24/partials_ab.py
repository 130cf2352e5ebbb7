"""Twenty-fourth round: the eager split-K call's partials in one shared workspace per stream against a fresh
allocation per call (the code before), taking turns in one process: bench host's calls at M = 1 (down is a
split-K GEMM there), 10 turns of 300 calls each, and the outputs' bits under either."""
import json
import statistics
import sys

import torch

from benchmarks.decode import host_calls
from benchmarks.timing import host_us
from fused_quant.kernels import gemm_launch as g

shared = g.split_k_partials


def fresh(index, stream, dtype, numel, device):
    return torch.empty(numel, dtype=dtype, device=device)


calls, layers = host_calls()
bits = {}
for name, (qgu, qdown) in layers.items():
    fns = calls[name]
    for variant, fn in (("fresh", fresh), ("shared", shared)):
        g.split_k_partials = fn
        bits.setdefault(name, []).append((fns["QuantLinear(qa) down"]().clone(), fns["mlp"]().clone()))
    same = all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(*bits[name]))
    print(f"{name}: outputs of the two variants bit-equal: {same}", flush=True)
    assert same
rows = {}
for turn in range(10):
    for variant, fn in (("fresh", fresh), ("shared", shared)):
        g.split_k_partials = fn
        for cname, fns in calls.items():
            for c, f in fns.items():
                if c.startswith("checked"):
                    continue
                rows.setdefault(f"{cname} | {c}", {}).setdefault(variant, []).append(host_us(f, 300))
g.split_k_partials = shared
print("\nhost us per call at M = 1, median (min) over 10 turns of 300 calls: fresh allocation -> shared workspace")
for key, v in rows.items():
    a, b = statistics.median(v["fresh"]), statistics.median(v["shared"])
    print(f"  {key:45s} {a:6.1f} ({min(v['fresh']):5.1f}) -> {b:6.1f} ({min(v['shared']):5.1f})  {b - a:+.1f}",
          flush=True)
json.dump({"calls": rows, "torch": torch.__version__, "triton": __import__("triton").__version__},
          open(sys.argv[1], "w"), indent=1)
