"""A/B on one machine, variants in turns: per-token producers split over programs under capture (token_split
of sm_90) vs off. MLP graph replay at M = 1, 4, 16, 64 (bf16 and FP8 static as controls: their code is the
same in every variant), the silu producer alone under graph, and the replayed MLP output bits per variant."""
import dataclasses, json, sys, time
import torch
import fused_quant
from fused_quant import fused_act_quant, keys as K
from fused_quant.kernels import heuristics
from benchmarks import decode
from benchmarks.timing import graph_us

out = sys.argv[1]
base = heuristics.CONFIGS["sm_90"]
VARIANTS = {"m64": (64, 8192, 1024, 4), "m256": (256, 8192, 1024, 4), "m256b2048w8": (256, 8192, 2048, 8),
            "m256b1024w8": (256, 8192, 1024, 8)}
MS = (1, 64, 128, 256)
torch.manual_seed(0)
d, h = 4096, 14336
peers = {"bf16": decode._mlp(None, d, h, 2)}
for name, key in decode.MLP_KEYS.items():
    peers[name] = decode._mlp(key, d, h, 2)
xs = {m: torch.randn(m, d, device="cuda", dtype=torch.bfloat16) for m in MS}
hx = {m: [torch.randn(m, 2 * h, device="cuda", dtype=torch.bfloat16) for _ in range(8)] for m in (64, 128, 256)}
res = {"variants": VARIANTS, "turns": []}
ref_bits = {}


def replayed(fn, x):
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(x); fn(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = fn(x)
    g.replay(); torch.cuda.synchronize()
    return y.clone()


t0 = time.time()
for turn in range(2):
    order = list(VARIANTS) if turn == 0 else list(reversed(VARIANTS))
    for v in order:
        heuristics.CONFIGS["sm_90"] = dataclasses.replace(base, token_split=VARIANTS[v])
        fused_quant.reset()
        row = {"turn": turn, "variant": v, "mlp": {}, "producer": {}}
        for m in MS:
            row["mlp"][m] = {n: graph_us([lambda f=f: f(xs[m]) for f in fns], calls=8) for n, fns in peers.items()}
            for n in decode.MLP_KEYS:
                bits = replayed(peers[n][0], xs[m]).view(torch.int16)
                if (n, m) not in ref_bits:
                    ref_bits[(n, m)] = bits
                elif not torch.equal(bits, ref_bits[(n, m)]):
                    print("MISMATCH", v, n, m, flush=True); row.setdefault("mismatch", []).append((n, m))
        for m in (64, 128, 256):
            for kn in ("fp8_token", "int8_token"):
                key = decode.MLP_KEYS[kn]
                row["producer"][f"{kn} M={m}"] = graph_us(
                    [lambda x=x, key=key: fused_act_quant("silu_and_mul", x, key) for x in hx[m]], calls=16)
        res["turns"].append(row)
        print(f"[{time.time()-t0:.0f}s] turn {turn} {v}: " + " | ".join(
            f"M={m} " + "/".join(f"{row['mlp'][m][n]:.2f}" for n in ("bf16", "fp8_static", "fp8_token", "int8_token"))
            for m in MS) + " | prod " + " ".join(f"{k} {u:.2f}" for k, u in row["producer"].items()), flush=True)
json.dump(res, open(f"{out}/split_ab.json", "w"), indent=1)
print("\n== MLP graph us, mean of turns: bf16 / fp8_static / fp8_token / int8_token; then producer alone")
for v in VARIANTS:
    rows = [r for r in res["turns"] if r["variant"] == v]
    mean = lambda f: sum(f(r) for r in rows) / len(rows)
    print(f"{v:8s} " + " | ".join(f"M={m} " + "/".join(f"{mean(lambda r: r['mlp'][m][n]):.2f}" for n in
          ("bf16", "fp8_static", "fp8_token", "int8_token")) for m in MS)
          + " | " + " ".join(f"{k} {mean(lambda r: r['producer'][k]):.2f}" for k in rows[0]["producer"]))
