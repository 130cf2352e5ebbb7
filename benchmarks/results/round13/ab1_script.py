"""A/B: per-token QuantLinear(x) quantizing in its small-M GEMM in eager calls (new) vs the producer then
the GEMM (base), turns on one machine; then an eager profile of the MLP at M = 1 (kernel GPU time per
iteration vs wall)."""
import json, sys, time
import torch
import fused_quant
from fused_quant.kernels import gemm_launch as g
from benchmarks import decode

out = sys.argv[1]
orig = g.quantizer_of


def base(bound, p):
    return None if p.per_token else orig(bound, p)


res = {}
for turn in range(2):
    for name, fn in (("base", base), ("new", orig)):
        g.quantizer_of = fn
        fused_quant.reset()
        torch.cuda.empty_cache()
        mlp = decode.bench_mlp(quick=True, ms=(1, 16))
        host = decode.bench_host(quick=True)
        res[f"{name}{turn}"] = dict(mlp=mlp, host=host)
g.quantizer_of = orig
fused_quant.reset()
json.dump(res, open(f"{out}/tokq.json", "w"), indent=1, default=str)

# eager profile at M = 1: per-iteration GPU kernel time against the wall time
from torch.profiler import ProfilerActivity, profile

prof_rows = {}
peers = {"bf16": decode._mlp(None, 4096, 14336, 1)[0]}
for name, key in decode.MLP_KEYS.items():
    peers[name] = decode._mlp(key, 4096, 14336, 1)[0]
x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
iters = 50
for name, fn in peers.items():
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / iters * 1e6
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    starts = sorted((e.time_range.start, e.time_range.end, e.name) for e in kernels)
    busy = sum(e - s for s, e, _ in starts) / iters
    span = (starts[-1][1] - starts[0][0]) / iters if starts else 0
    per = {}
    for s, e, n in starts:
        per.setdefault(n[:60], []).append(e - s)
    prof_rows[name] = dict(wall_us=wall, gpu_busy_us=busy, gpu_span_us=span,
                           kernels={n: (len(v) / iters, sum(v) / len(v)) for n, v in per.items()})
json.dump(prof_rows, open(f"{out}/eager_profile.json", "w"), indent=1)

print("\n== A/B per-token quantizing in eager (us)")
for t, r in res.items():
    rows = {row["M"]: row for row in r["mlp"]["rows"]} if isinstance(r["mlp"], dict) else {row["M"]: row for row in r["mlp"]}
    h = r["host"]["us_per_call"]
    print(t, " ".join(f"M={m}: " + "/".join(f"{rows[m]['eager_us'][k]:.1f}" for k in ("bf16", "fp8_static", "fp8_token", "int8_token"))
                     + " g " + "/".join(f"{rows[m]['graph_us'][k]:.1f}" for k in ("bf16", "fp8_static", "fp8_token", "int8_token"))
                     for m in (1, 16)),
          "| host x-gate_up " + "/".join(f"{h[k]['QuantLinear(x) gate_up']:.1f}" for k in ("fp8_static", "fp8_token", "int8_token")),
          "mlp " + "/".join(f"{h[k]['mlp']:.1f}" for k in ("fp8_static", "fp8_token", "int8_token")), f"bf16 mlp {h['bf16']['mlp']:.1f}")
print("\n== eager profile M=1: wall / GPU busy / GPU span per iteration (us)")
for name, r in prof_rows.items():
    print(f"{name}: wall {r['wall_us']:.1f} busy {r['gpu_busy_us']:.1f} span {r['gpu_span_us']:.1f} | "
          + "; ".join(f"{n[:40]} x{c:.0f} {us:.1f}" for n, (c, us) in r["kernels"].items()))
