"""Round 22, run 1: the MLP with gate_up's GEMM applying the silu_and_mul producer in its epilogue (per-token keys:
the activation and absmax parts, then one quantizing launch)
(``linear_act_quant``) against the two calls (``maybe_fused_act_quant`` on gate_up's output): bits of the
MLP's output, GPU time under graph replay (turns two / one / two / one), eager wall time."""

import json
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us, loop_us  # noqa: E402
import fused_quant as fq  # noqa: E402
from fused_quant import keys as K  # noqa: E402

D, H = 4096, 14336
MS = [int(m) for m in os.environ.get("MS", "1,2,4,8,16,32,64,128").split(",")]
KEYS = {"fp8_static": fq.kFp8StaticTensorSym, "int8_static": fq.kInt8StaticTensorSym,
        "fp8_token": fq.kFp8DynamicTokenSym, "int8_token": fq.kInt8DynamicTokenSym}
torch.manual_seed(0)
act = fq.SiluAndMul()
layers = {}
for name, key in KEYS.items():
    copies = []
    for _ in range(2):
        gu = torch.nn.Linear(D, 2 * H, bias=False, device="cuda", dtype=torch.bfloat16)
        dn = torch.nn.Linear(H, D, bias=False, device="cuda", dtype=torch.bfloat16)
        s = 0.05 if K.is_static(key) else None
        copies.append((fq.QuantLinear.from_float(gu, key, s, name="gate_up"),
                       fq.QuantLinear.from_float(dn, key, s, name="down")))
        del gu, dn
    layers[name] = copies
bf16 = [(torch.nn.Linear(D, 2 * H, bias=False, device="cuda", dtype=torch.bfloat16),
         torch.nn.Linear(H, D, bias=False, device="cuda", dtype=torch.bfloat16)) for _ in range(2)]


def two(qgu, qd, x):
    return qd(fq.maybe_fused_act_quant(act, qgu(x), qd))


def one(qgu, qd, x):
    return qd(fq.linear_act_quant(qgu, x, act, qd))


rows = []
with torch.no_grad():
    for m in MS:
        x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
        row = {"M": m, "bits": {}, "graph": {}, "eager": {}, "fused_calls": {}}
        fns = {"bf16": [lambda gu=gu, dn=dn: dn(act(gu(x))) for gu, dn in bf16]}
        for name, copies in layers.items():
            outs = []
            for f in (two, one, one, one):
                outs.append(f(*copies[0], x))
            row["bits"][name] = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs[1:])
            qgu, qd = copies[0]
            row["fused_calls"][name] = sum(len(b.producing) for b in qgu._bound.values())
            fns[f"{name}_two"] = [lambda c=c: two(*c, x) for c in copies]
            fns[f"{name}_one"] = [lambda c=c: one(*c, x) for c in copies]
        for turn in range(4):
            for label, f in fns.items():
                if label == "bf16" or label.endswith("_two" if turn % 2 == 0 else "_one"):
                    row["graph"].setdefault(label, []).append(graph_us(f, calls=8))
        row["eager"] = loop_us({label: f[0] for label, f in fns.items()}, target_ms=20, rounds=3)
        rows.append(row)
        g = {k: min(v) for k, v in row["graph"].items()}
        print(f"M={m:4d} bf16 {g['bf16']:6.1f} | " + " | ".join(
            f"{n}: two {g[n + '_two']:6.1f} one {g[n + '_one']:6.1f} ({g['bf16'] / g[n + '_two']:.2f} -> "
            f"{g['bf16'] / g[n + '_one']:.2f}x) bits {row['bits'][n]} fused {row['fused_calls'][n]}"
            for n in KEYS), flush=True)
        print(f"       eager: " + " ".join(f"{k} {v:.1f}" for k, v in row["eager"].items()), flush=True)
out = os.environ.get("OUT", ".")
with open(os.path.join(out, "run1_producing_ab.json"), "w") as f:
    json.dump(rows, f, indent=1)
