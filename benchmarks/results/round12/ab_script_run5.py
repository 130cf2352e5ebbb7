"""A/B of run 5 (benchmarks/RESULTS.md, twelfth round): small-M GEMM L2 prefetch before the PDL wait, and which
kernels let the next one launch before they wait. Written against the code as it was for that run, which had a
module switch ``gemm_launch.SPLIT_K_LAUNCH_FIRST`` (the committed code launches the split-K epilogue first);
runs 1-4 used earlier versions of this script with the variant lists given in RESULTS.md.
``python ab_script_run5.py OUT.json 1,16,64,256`` from the checkout root on a GPU."""
import json, sys, time
import torch
import fused_quant
from fused_quant.kernels import gemm_launch as g, launch
from benchmarks.decode import _mlp, MLP_KEYS
from benchmarks.timing import graph_us, loop_us

orig_pdl = launch.pdl_options
orig_lines = g.prefetch_lines
def set_variant(pf, mode, ev=""):
    if pf == "32k/program":
        g.PREFETCH_BYTES = 32768
        g.prefetch_lines = lambda bn, programs, pdl: orig_lines(bn, 1, pdl)
    else:
        g.PREFETCH_BYTES = pf
        g.prefetch_lines = orig_lines
    g.SPLIT_K_LAUNCH_FIRST = mode != "mixedP"
    if mode == "all_launch_first":
        launch.pdl_options = lambda i, launch_first=False: orig_pdl(i, True)
    elif mode == "all_wait_first":
        launch.pdl_options = lambda i, launch_first=False: orig_pdl(i, False)
    else:
        launch.pdl_options = orig_pdl
    fused_quant.reset()

torch.manual_seed(0)
d, h = 4096, 14336
peers = {"bf16": _mlp(None, d, h, 2)}
for name, key in MLP_KEYS.items():
    peers[name] = _mlp(key, d, h, 2)
ms = [int(a) for a in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 16, 64, 256]
xs = {m: torch.randn(m, d, device="cuda", dtype=torch.bfloat16) for m in ms}
variants = [("W_4M", 4 << 20, "all_wait_first"), ("mixed_4M", 4 << 20, "mixed"), ("mixedP_4M", 4 << 20, "mixedP")]
ref = {}
res = []
for turn in range(3):
    for vname, pf, mode in variants:
        set_variant(pf, mode)
        t0 = time.time()
        for m in ms:
            x = xs[m]
            row = {"turn": turn, "variant": vname, "M": m}
            for name, fns in peers.items():
                if name == "bf16" and vname != "W_4M":
                    continue
                out = fns[0](x)
                key = (name, m)
                if key not in ref:
                    ref[key] = out.clone()
                same = torch.equal(out, ref[key])
                row[name] = graph_us([lambda f=f: f(x) for f in fns], calls=8)
                if not same:
                    row[name + "_MISMATCH"] = True
            if m <= 16:
                e = loop_us({n: (lambda fns=fns: fns[0](x)) for n, fns in peers.items() if n != "bf16" or vname == "W_4M"},
                            target_ms=20, rounds=3)
                row.update({f"eager_{k}": v for k, v in e.items()})
            res.append(row)
            print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        print(f"# {vname} turn {turn}: {time.time()-t0:.1f}s", flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
# summary: per variant, mean over turns, graph us
import statistics
print("\nvariant      M   fp8_static fp8_token int8_token  (graph us, mean of turns)")
for vname, *_ in variants:
    for m in ms:
        rows = [r for r in res if r["variant"] == vname and r["M"] == m]
        print(f"{vname:12s} {m:4d} " + " ".join(f"{statistics.mean(r[k] for r in rows):9.2f}" for k in MLP_KEYS))
for m in ms:
    rows = [r for r in res if r["variant"] == "W_4M" and r["M"] == m]
    print(f"bf16 M={m}: " + " ".join(f"{r['bf16']:.2f}" for r in rows))

from benchmarks.decode import bench_gemm
print("\nGEMM alone (graph us, ours):")
for turn in range(2):
    for vname, pf, mode in variants:
        set_variant(pf, mode)
        r = bench_gemm(quick=True, ms=(1, 16, 64), shapes={"qkv": (6144, 4096), "o": (4096, 4096), "down": (4096, 14336)},
                       ceiling=4268.0)
        print(vname, turn, " ".join(f"{x['kind']}/{x['shape']}/{x['M']}={x['us']['ours']:.1f}" for x in r["rows"]), flush=True)
