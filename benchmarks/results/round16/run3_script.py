"""A/B on one machine, variants in turns: (1) the layer's input quantized inside the small-M GEMM under
capture too (modules.capturing patched to False for the bound forward), (2) other down configs at M=1/16.
MLP graph replay at M = 1, 4, 16; output bits compared with the base variant."""
import json, sys, time
import torch
import fused_quant
from fused_quant import modules, runtime
from fused_quant.kernels import gemm_launch as g
from benchmarks import decode
from benchmarks.timing import graph_us

out = sys.argv[1]
orig_capturing = modules.capturing
DOWN = (4096, 14336)
VARIANTS = {
    "base": {},
    "xq": {"xq": True},
    "down_b64s4": {"down": {1: (64, 16, 256, 4, 4, 4), 4: (64, 16, 256, 4, 4, 4)}},
    "down_b128w4": {"down": {1: (128, 16, 256, 4, 4, 4), 4: (128, 16, 256, 4, 4, 4), 16: (128, 16, 256, 4, 4, 4)}},
    "down_b64k512s2": {"down": {1: (64, 16, 512, 2, 4, 4), 4: (64, 16, 512, 2, 4, 4)}},
    "down16_b64s4": {"down": {16: (64, 16, 256, 4, 4, 4)}},
}
MS = (1, 4, 16)
torch.manual_seed(0)
d, h = 4096, 14336
peers = {"bf16": decode._mlp(None, d, h, 2)}
for name, key in decode.MLP_KEYS.items():
    peers[name] = decode._mlp(key, d, h, 2)
xs = {m: torch.randn(m, d, device="cuda", dtype=torch.bfloat16) for m in MS}
res = {"variants": {k: str(v) for k, v in VARIANTS.items()}, "turns": []}
ref_bits = {}


def apply(v):
    modules.capturing = orig_capturing
    fused_quant.reset()
    spec = VARIANTS[v]
    if spec.get("xq"):
        modules.capturing = lambda: False
    for bucket, (bn, bm, bk, splits, warps, stages) in spec.get("down", {}).items():
        for kind in ("fp8", "int8"):
            row = g.config_table(g.SMALL_M_CONFIG_FILE)[("sm_90", kind)][DOWN][bucket]
            row.update(BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, splits=splits, num_warps=warps, num_stages=stages)


def replayed(fn, x):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(x); fn(x)
    torch.cuda.current_stream().wait_stream(side)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        y = fn(x)
    gr.replay(); torch.cuda.synchronize()
    return y.clone()


t0 = time.time()
for turn in range(2):
    order = list(VARIANTS) if turn == 0 else list(reversed(VARIANTS))
    for v in order:
        apply(v)
        row = {"turn": turn, "variant": v, "mlp": {}}
        for m in MS:
            row["mlp"][m] = {n: graph_us([lambda f=f: f(xs[m]) for f in fns], calls=8) for n, fns in peers.items()}
            for n in decode.MLP_KEYS:
                bits = replayed(peers[n][0], xs[m]).view(torch.int16)
                if (n, m) not in ref_bits:
                    ref_bits[(n, m)] = bits
                elif not torch.equal(bits, ref_bits[(n, m)]):
                    print("MISMATCH", v, n, m, flush=True); row.setdefault("mismatch", []).append((n, m))
        res["turns"].append(row)
        print(f"[{time.time()-t0:.0f}s] turn {turn} {v}: " + " | ".join(
            f"M={m} " + "/".join(f"{row['mlp'][m][n]:.2f}" for n in ("bf16", "fp8_static", "fp8_token", "int8_token"))
            for m in MS), flush=True)
modules.capturing = orig_capturing
json.dump(res, open(f"{out}/ab16b.json", "w"), indent=1)
print("\n== MLP graph us, mean of turns: bf16 / fp8_static / fp8_token / int8_token")
for v in VARIANTS:
    rows = [r for r in res["turns"] if r["variant"] == v]
    mean = lambda f: sum(f(r) for r in rows) / len(rows)
    print(f"{v:15s} " + " | ".join(f"M={m} " + "/".join(f"{mean(lambda r: r['mlp'][m][n]):.2f}" for n in
          ("bf16", "fp8_static", "fp8_token", "int8_token")) for m in MS))
