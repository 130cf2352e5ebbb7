"""Decode experiments, one call: (A) per-kernel profile of graph-replayed MLPs; (B) identity producers
alone; (C) FP8 small-M GEMM with the partial-sum interval 32 vs 128 (time and float64 error)."""
import json, sys, time, collections
import torch
import fused_quant
from fused_quant import fused_act_quant, keys as K
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g
from benchmarks import decode
from benchmarks.timing import graph_us
from benchmarks.sweep_small_m_gemm import _error, error_bound, torch_times

out = sys.argv[1]
parts = sys.argv[2] if len(sys.argv) > 2 else "ABC"
t0 = time.time()
res = {}
log = open(f"{out}/exp16.log", "w")


def say(s):
    print(s, flush=True)
    log.write(s + "\n"); log.flush()


def profile_graph(fns, x, calls=8, replays=10):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns * 2:
            f(x)
    torch.cuda.current_stream().wait_stream(side)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        for i in range(calls):
            fns[i % len(fns)](x)
    gr.replay(); torch.cuda.synchronize()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            gr.replay()
        torch.cuda.synchronize()
    path = f"/tmp/trace_{time.time_ns()}.json"
    prof.export_chrome_trace(path)
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
    ev.sort(key=lambda e: e["ts"])
    n = len(ev) // (calls * replays)
    per = collections.OrderedDict()
    # kernels of one call in order: name, mean duration, mean start offset from the call's first kernel
    for j in range(n):
        durs, offs = [], []
        for c in range(calls * replays):
            e, first = ev[c * n + j], ev[c * n]
            durs.append(e["dur"]); offs.append(e["ts"] - first["ts"])
        per[f"{j}:{ev[j]['name'][:60]}"] = (sum(durs) / len(durs), sum(offs) / len(offs))
    span = (ev[-1]["ts"] + ev[-1]["dur"] - ev[0]["ts"]) / (calls * replays)
    del gr
    return per, span, len(ev) % (calls * replays)


if "A" in parts:
    torch.manual_seed(0)
    d, h = 4096, 14336
    peers = {"bf16": decode._mlp(None, d, h, 2)}
    for name, key in decode.MLP_KEYS.items():
        peers[name] = decode._mlp(key, d, h, 2)
    res["A"] = {}
    for m in (1, 16, 256):
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        for name, fns in peers.items():
            if name == "bf16" and m != 256:
                continue
            us = graph_us([lambda f=f: f(x) for f in fns], calls=8)
            per, span, rem = profile_graph(fns, x)
            res["A"][f"{name} M={m}"] = {"graph_us": us, "span_us": span, "kernels": per}
            say(f"[{time.time()-t0:.0f}s] A {name} M={m}: graph {us:.2f} us, traced span/call {span:.2f} (rem {rem})")
            for k_, (dur, off) in per.items():
                say(f"     {k_:64s} dur {dur:7.2f}  start +{off:7.2f}")
    del peers
    torch.cuda.empty_cache()

if "B" in parts:
    res["B"] = {}
    for m in (1, 16):
        xs = [torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        hs = [torch.randn(m, 28672, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        sc = torch.tensor([0.05], device="cuda")
        for kn, key in decode.MLP_KEYS.items():
            s = sc if K.is_static(key) else None
            a = graph_us([lambda x=x: fused_act_quant("identity", x, key, s) for x in xs], calls=16)
            b = graph_us([lambda x=x: fused_act_quant("silu_and_mul", x, key, s) for x in hs], calls=16)
            res["B"][f"{kn} M={m}"] = (a, b)
            say(f"[{time.time()-t0:.0f}s] B {kn} M={m}: identity D=4096 {a:.2f} us, silu_and_mul H=14336 {b:.2f} us")

if "C" in parts:
    res["C"] = []
    cases = {"gate_up": (28672, 4096), "down": (4096, 14336)}
    tiles = {  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
        16: [(16, 128, 256, 8, 4), (16, 64, 256, 4, 4)],
        64: [(64, 64, 128, 4, 4), (64, 128, 128, 4, 4), (64, 64, 256, 4, 3)],
        128: [(64, 64, 128, 4, 4), (128, 64, 128, 4, 4), (128, 128, 128, 8, 3), (128, 128, 128, 8, 4), (128, 64, 256, 4, 4)],
        256: [(128, 128, 128, 8, 4), (128, 64, 128, 4, 4), (256, 128, 128, 8, 4), (256, 128, 64, 8, 4), (256, 64, 128, 8, 3), (64, 128, 128, 4, 4)],
    }
    for label, (n, k) in cases.items():
        weights = decode._weights("fp8", n, k, decode.copies_for(n * k), torch.float8_e4m3fn)
        for m, tl_ in tiles.items():
            xq = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            xs_ten = torch.full((1, 1), 0.005, device="cuda")
            tt = torch_times("fp8", xq, xs, xs_ten, weights)
            p = GemmProblem(m, n, k, "fp8", xq.dtype, torch.bfloat16, xq.device, True, True, False)
            w, ws = weights[0]
            for bm, bn, bk, warps, stages in tl_:
                for splits in ((1, 2) if label == "down" else (1,)):
                    row = {"shape": label, "m": m, "cfg": (bm, bn, bk, warps, stages, splits), "torch": tt}
                    for imp in (32, 128):
                        g.FP8_IMPRECISE_ACC = imp
                        fused_quant.reset()
                        cfg = dict(BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, splits=splits, num_warps=warps, num_stages=stages)
                        try:
                            calls = [g.bind_small_m(p, w_, ws_, None, cfg) for w_, ws_ in weights]
                            calls[0](xq, xs)
                            us = graph_us([lambda c=c: c(xq, xs) for c in calls])
                            import dataclasses
                            p32 = dataclasses.replace(p, out_dtype=torch.float32)
                            err = _error(g.bind_small_m(p32, w, ws, None, cfg)(xq, xs), xq, xs, w, ws)
                        except Exception as exc:
                            us, err = None, f"{type(exc).__name__}: {str(exc)[:80]}"
                        row[f"imp{imp}"] = (us, err)
                    res["C"].append(row)
                    f = lambda v: f"{v[0]:7.2f} us err {v[1]:.1e}" if v[0] else str(v[1])
                    say(f"[{time.time()-t0:.0f}s] C {label} M={m} {row['cfg']}: imp32 {f(row['imp32'])} | imp128 "
                        f"{f(row['imp128'])} | torch " + " ".join(f"{a} {b:.2f}" for a, b in tt.items())
                        + f" | bound {error_bound('fp8', k):.1e}")
        del weights
        torch.cuda.empty_cache()
    g.FP8_IMPRECISE_ACC = 32
json.dump(res, open(f"{out}/exp16.json", "w"), indent=1, default=str)
say(f"done {time.time()-t0:.0f}s")
