"""Twenty-third round, run 3: the per-token silu_and_mul producer under CUDA graph capture at few tokens.
Today (``token_split``) each row is spread over programs in two launches (the parts' absmax, then the rest:
1.4 + 1.2 us of the M = 16 MLP's critical path in round 22's profile). Against: one program per row holding
the row as one block (the ``rows`` variant, which ``silu_token_wide_rows`` uses at M = 224-256), 32 or 16 warps.
Per-token MLPs (linear_act_quant, as QuantGatedMLP), graph replay, variants taking turns; bits of a replay
against the eager MLP."""

import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us  # noqa: E402
import fused_quant as fq  # noqa: E402
from fused_quant.kernels import heuristics  # noqa: E402

D, H = 4096, 14336
MS = [int(m) for m in os.environ.get("MS", "1,2,4,8,16,32,64").split(",")]
KEYS = {"fp8_token": fq.kFp8DynamicTokenSym, "int8_token": fq.kInt8DynamicTokenSym}
BASE = heuristics.CONFIGS["sm_90"]
VARIANTS = {
    "split": BASE,
    "rows32": dataclasses.replace(BASE, token_split=(0, 0, 0, 0), silu_token_wide_rows=(1, 256, 14336, 14336, 32)),
    "rows16": dataclasses.replace(BASE, token_split=(0, 0, 0, 0), silu_token_wide_rows=(1, 256, 14336, 14336, 16)),
}
torch.manual_seed(0)
act = fq.SiluAndMul()
layers = {}
for name, key in KEYS.items():
    copies = []
    for _ in range(2):
        gu = torch.nn.Linear(D, 2 * H, bias=False, device="cuda", dtype=torch.bfloat16)
        dn = torch.nn.Linear(H, D, bias=False, device="cuda", dtype=torch.bfloat16)
        copies.append((fq.QuantLinear.from_float(gu, key, None, name="gate_up"),
                       fq.QuantLinear.from_float(dn, key, None, name="down")))
        del gu, dn
    layers[name] = copies


def mlp(qgu, qd, x):
    return qd(fq.linear_act_quant(qgu, x, act, qd))


rows = []
with torch.no_grad():
    for m in MS:
        x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
        row = {"M": m, "graph": {}, "bits": {}}
        for turn in range(2):
            for vname, cfg in VARIANTS.items():
                heuristics.CONFIGS["sm_90"] = cfg
                fq.reset()
                for name, copies in layers.items():
                    eager = mlp(*copies[0], x)
                    for _ in range(3):
                        mlp(*copies[0], x)
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        mlp(*copies[0], x)
                    torch.cuda.current_stream().wait_stream(side)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        out = mlp(*copies[0], x)
                    g.replay()
                    torch.cuda.synchronize()
                    row["bits"].setdefault(f"{name}_{vname}", []).append(
                        bool(torch.equal(eager.view(torch.int16), out.view(torch.int16))))
                    del g
                    row["graph"].setdefault(f"{name}_{vname}", []).append(
                        graph_us([lambda c=c: mlp(*c, x) for c in copies], calls=8))
        heuristics.CONFIGS["sm_90"] = BASE
        rows.append(row)
        gm = {k: min(v) for k, v in row["graph"].items()}
        print(f"M={m:4d} " + " | ".join(f"{k} {v:6.2f}{'' if all(row['bits'][k]) else ' BITS DIFFER'}"
                                       for k, v in gm.items()), flush=True)
with open(os.path.join(os.environ.get("OUT", "."), "run3_token_rows_ab.json"), "w") as f:
    json.dump(rows, f, indent=1)
