"""Thirty-ninth round, run 4: the int8 per-token Llama-3-8B MLP with the pointer rows of round 38 against the
descriptor rows now installed, timed as ``bench mlp`` times it (an eager loop of ~40 ms x 7 rounds, then CUDA-graph
replays), bf16's MLP between them, five alternating turns per token count. Run 3 saw the GPU at its power cap
(clocks 1425-1455 MHz at 659-693 W) during the bench's loops, and the int8 MLP 9-13% slower there than in short
bursts; this times both int8 arms under the same sustained load. Output bits compared between the arms."""

import json
import sys

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import graph_us, loop_us, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

sys.path.insert(0, "benchmarks/results/round39")
from run2_int8_mlp_ab import BEFORE  # noqa: E402  (round 38's rows, as run 2 used them)

MS = [int(v) for v in sys.argv[1].split(",")]


def use(rows):
    g.INT8_GEMM_CONFIGS, g.INT8_GEMM_DEVICE_CONFIGS = rows, {}
    fused_quant.reset()


def main():
    name = torch.cuda.get_device_name()
    arms = {"pointer rows": tuple((*r, "pointers") for r in BEFORE.get(name, BEFORE["default"])),
            "descriptor rows": g.INT8_GEMM_CONFIGS}
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    bf16 = decode._mlp(None, d, h, 2)
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    out = {"versions": versions(), "rows": []}
    print(out["versions"], flush=True)
    for m in MS:
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        calls = 4 if m >= 4096 else 8
        eager, graph, bits = {}, {}, {}
        for _ in range(5):
            for arm in ("bf16", *arms):
                fns = bf16 if arm == "bf16" else int8
                if arm != "bf16":
                    use(arms[arm])
                    bits[arm] = int8[0](x).view(torch.int16)
                eager.setdefault(arm, []).append(loop_us({arm: lambda: fns[0](x)})[arm])
                graph.setdefault(arm, []).append(graph_us([lambda f=f: f(x) for f in fns], calls=calls))
        same = torch.equal(*bits.values())
        med = {k: sorted(v)[2] for k, v in graph.items()}
        row = {"M": m, "eager_us": eager, "graph_us": graph, "graph_median_us": med, "same_bits": same,
               "graph_x_bf16": {a: med["bf16"] / med[a] for a in arms}}
        out["rows"].append(row)
        print(f"M={m:6d} graph medians of 5 turns: bf16 {med['bf16']:8.1f}  pointer rows {med['pointer rows']:8.1f} "
              f"({row['graph_x_bf16']['pointer rows']:.2f}x)  descriptor rows {med['descriptor rows']:8.1f} "
              f"({row['graph_x_bf16']['descriptor rows']:.2f}x)  same bits {same}", flush=True)
        print("   turns: " + "; ".join(f"{a} " + "/".join(f"{v:.0f}" for v in graph[a]) for a in graph), flush=True)
        if not same:
            raise SystemExit(f"M={m}: the two arms gave other bits")
    json.dump(out, open(sys.argv[2], "w"), indent=1)


if __name__ == "__main__":
    main()
