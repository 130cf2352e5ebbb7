"""Thirty-ninth round, run 2: the int8 per-token Llama-3-8B MLP under graph replay with the Triton int8 GEMM's rows
before this round (the pointer kernel: the H200's rows, or the H100's own on an H100, as round 38 left them) against
the descriptor rows now installed (``INT8_GEMM_CONFIGS``), three alternating turns per token count, bf16's MLP timed
in the same turns; each arm's output bits compared (int8 sums are exact: any tile gives the same bits)."""

import json
import sys

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import graph_us, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

# the rows of round 38 (fused_quant/kernels/gemm_launch.py at f363e61), all read through pointers
BEFORE = {"default": ((64, 64, 64, 128, 8, 4, 4), (256, 64, 128, 128, 8, 4, 4), (4096, 128, 128, 64, 8, 4, 5),
                      (1 << 62, 128, 256, 128, 16, 8, 3)),
          "NVIDIA H100 80GB HBM3": ((64, 64, 64, 128, 8, 4, 4), (256, 64, 128, 128, 8, 4, 4),
                                    (512, 128, 128, 256, 8, 8, 3), (1 << 62, 128, 256, 128, 16, 8, 3))}
MS = [int(v) for v in sys.argv[1].split(",")] if len(sys.argv) > 1 else [512, 1024, 2048, 4096, 16384]


def use(rows):
    g.INT8_GEMM_CONFIGS, g.INT8_GEMM_DEVICE_CONFIGS = rows, {}
    fused_quant.reset()  # every layer binds again, with these rows


def main():
    name = torch.cuda.get_device_name()
    arms = {"pointer rows": tuple((*r, "pointers") for r in BEFORE.get(name, BEFORE["default"])),
            "descriptor rows": g.INT8_GEMM_CONFIGS}
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    bf16 = decode._mlp(None, d, h, 2)
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    out = {"versions": versions(), "arms": {k: [list(r) for r in v] for k, v in arms.items()}, "rows": []}
    print(out["versions"], flush=True)
    for m in MS:
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        times = {"bf16": [], **{arm: [] for arm in arms}}
        bits = {}
        for _ in range(3):
            times["bf16"].append(graph_us([lambda f=f: f(x) for f in bf16], calls=4 if m >= 4096 else 8))
            for arm, rows in arms.items():
                use(rows)
                bits[arm] = int8[0](x).view(torch.int16)
                times[arm].append(graph_us([lambda f=f: f(x) for f in int8], calls=4 if m >= 4096 else 8))
        same = torch.equal(*bits.values())
        best = {k: min(v) for k, v in times.items()}
        row = {"M": m, "us": times, "best_us": best, "same_bits": same,
               "x_bf16": {arm: best["bf16"] / best[arm] for arm in arms}}
        out["rows"].append(row)
        print(f"M={m:6d} bf16 {best['bf16']:8.1f}  int8 pointer rows {best['pointer rows']:8.1f} "
              f"({row['x_bf16']['pointer rows']:.2f}x)  descriptor rows {best['descriptor rows']:8.1f} "
              f"({row['x_bf16']['descriptor rows']:.2f}x)  same bits {same}", flush=True)
        if not same:
            raise SystemExit(f"M={m}: the two arms gave other bits")
    json.dump(out, open(sys.argv[2] if len(sys.argv) > 2 else "int8_mlp_ab.json", "w"), indent=1)


if __name__ == "__main__":
    main()
