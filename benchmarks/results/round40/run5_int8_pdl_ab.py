"""Fortieth round, run 5: why the int8 per-token MLP reads 10-20% slower at 1024-4096 tokens in ``bench mlp``'s
sequence than in ``trace_mlp`` on the same H100 (308.7 against 355.9 us at 1024 tokens in run 4), where FP8 per-token
reads the same in both. A suspect: programmatic dependent launch. The descriptor GEMM's grid is persistent (one
program per SM), and with PDL it lets the next kernel launch right after its wait, whose programs then sit on the SMs
through the whole GEMM. Arms, in the bench's sequence (an eager loop, then CUDA-graph replays), four turns rotated,
medians: bf16 and FP8 per-token (controls), the int8 MLP as installed, and the int8 MLP whose int8 GEMM launches
without PDL (its plans made with ``PDL`` off; every other kernel as installed). Output bits compared between the
int8 arms."""

import json
import sys

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import graph_us, loop_us, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels import launch

INSTALLED = g._triton_int8_call


def gemm_without_pdl(p, tma=False):
    saved = launch.pdl_options
    launch.pdl_options = lambda index, launch_first=False: {"PDL": False}
    try:
        return INSTALLED(p, tma)
    finally:
        launch.pdl_options = saved


def use(arm):
    g._triton_int8_call = gemm_without_pdl if arm == "int8 GEMM without PDL" else INSTALLED
    fused_quant.reset()


def main():
    ms = [int(v) for v in sys.argv[1].split(",")]
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    mlps = {"bf16": decode._mlp(None, d, h, 2), "fp8_token": decode._mlp(K.kFp8DynamicTokenSym, d, h, 2)}
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    mlps["int8 installed"] = mlps["int8 GEMM without PDL"] = int8
    out = {"versions": versions(), "rows": []}
    print(out["versions"], flush=True)
    names = list(mlps)
    for m in ms:
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        calls = 4 if m >= 4096 else 8
        eager, graph, bits = {a: [] for a in names}, {a: [] for a in names}, {}
        for turn in range(len(names)):
            for arm in names[turn:] + names[:turn]:
                fns = mlps[arm]
                use(arm)
                if arm.startswith("int8"):
                    bits[arm] = fns[0](x).view(torch.int16)
                eager[arm].append(loop_us({arm: lambda: fns[0](x)})[arm])
                graph[arm].append(graph_us([lambda f=f: f(x) for f in fns], calls=calls))
        same = torch.equal(*bits.values())
        med = {a: sorted(v)[len(v) // 2] for a, v in graph.items()}
        row = {"M": m, "graph_us": graph, "eager_us": eager, "graph_median_us": med, "same_bits": same,
               "x_bf16": {a: med["bf16"] / med[a] for a in names if a != "bf16"}}
        out["rows"].append(row)
        print(f"M={m:6d} graph medians: " + "  ".join(f"{a} {v:8.1f}" for a, v in med.items()) + "  x bf16 "
              + " / ".join(f"{v:.3f}" for v in row["x_bf16"].values()) + f"  same bits {same}", flush=True)
        print("   turns: " + "; ".join(f"{a} " + "/".join(f"{v:.0f}" for v in graph[a]) for a in names), flush=True)
        if not same:
            raise SystemExit(f"M={m}: the int8 arms gave other bits")
    use("int8 installed")
    json.dump(out, open(sys.argv[2], "w"), indent=1)


if __name__ == "__main__":
    main()
