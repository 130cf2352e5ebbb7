"""Next session, on the split-k-in-kernel branch: A/B of SPLIT_K_LAST_REDUCES (False: split_k_epilogue_kernel,
True: the last split reduces in the main kernel), in turns on one machine: MLP graph + eager at M = 1, 16, 64,
host per call at M = 1, and the split GEMMs alone (down, qkv, o) at M = 1, 4, 16 (graph, cycled weights)."""
import json, sys
import torch
import fused_quant
from fused_quant.kernels import gemm_launch as g
from benchmarks import decode

out = sys.argv[1]
res = {}
for turn in range(2):
    for name, flag in (("epilogue_kernel", False), ("last_reduces", True)):
        g.SPLIT_K_LAST_REDUCES = flag
        fused_quant.reset()
        torch.cuda.empty_cache()
        mlp = decode.bench_mlp(quick=True, ms=(1, 16, 64))
        host = decode.bench_host(quick=True)
        gemm = decode.bench_gemm(quick=True, ms=(1, 4, 16),
                                 shapes={k: decode.SHAPES[k] for k in ("down", "qkv", "o")})
        res[f"{name}{turn}"] = dict(mlp=mlp, host=host, gemm=gemm)
json.dump(res, open(f"{out}/splitk_ab.json", "w"), indent=1, default=str)
print("\n== A/B split-K reduction (us): MLP graph M=1/16/64 per key | eager M=1/16 | host down")
for t, r in res.items():
    rows = {row["M"]: row for row in r["mlp"]["rows"]}
    h = r["host"]["us_per_call"]
    keys = ("bf16", "fp8_static", "fp8_token", "int8_token")
    print(t, "g " + " ".join("/".join(f"{rows[m]['graph_us'][k]:.1f}" for k in keys) for m in (1, 16, 64)),
          "| e " + " ".join("/".join(f"{rows[m]['eager_us'][k]:.1f}" for k in keys) for m in (1, 16)),
          "| host down " + "/".join(f"{h[k]['QuantLinear(qa) down']:.1f}" for k in keys[1:]))
print("== split GEMMs alone (graph us, ours): shape kind M -> per turn")
gk = {}
for t, r in res.items():
    for row in r["gemm"]["rows"]:
        gk.setdefault((row["shape"], row["kind"], row["M"]), {})[t] = (row["us"]["ours"], row["picked"])
for (s, kd, m), v in gk.items():
    print(f"{s:5s} {kd:4s} M={m:3d} " + "  ".join(f"{t} {u:.1f}({p})" for t, (u, p) in v.items()))
