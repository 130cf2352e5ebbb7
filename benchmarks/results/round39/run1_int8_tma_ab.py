"""Thirty-ninth round, run 1: the int8 GEMM through tensor descriptors (TMA) against the installed pointer kernel.

Per Llama-3-8B linear and M: the installed call (``bind_triton_int8``, this GPU model's rows), then
``scaled_int8_gemm_tma_kernel`` in each candidate tile and grid (one program per tile; a persistent grid of one
program per SM, its tile loop flattened or not), every output compared bit for bit with the installed call's, then
FP8 ``torch._scaled_mm`` (tensor-wise) and bf16 ``F.linear``. GPU time of CUDA-graph replays (``timing.graph_us``);
the descriptors are made once per candidate (only GPU time is timed). Per M the sum over the four shapes.

python benchmarks/results/round39/run1_int8_tma_ab.py MS OUT.json
"""

import json
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from benchmarks.decode import SHAPES
from benchmarks.timing import graph_us, versions
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels.triton.int8_gemm import scaled_int8_gemm_tma_kernel

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
TILES = ((128, 256, 128, 8, 8, 3), (128, 256, 128, 16, 8, 3), (128, 256, 64, 8, 8, 4), (128, 128, 256, 8, 8, 3),
         (128, 128, 128, 8, 8, 4), (128, 128, 128, 8, 4, 4), (256, 128, 128, 8, 8, 3), (128, 256, 128, 8, 8, 4))
GRIDS = ("tiles", "persistent", "persistent flat")


def tma_call(xq, w, xs, ws, out, tile, grid_kind, sms):
    bm, bn, bk, gm, warps, stages = tile
    m, k = xq.shape
    n = w.shape[0]
    xd = TensorDescriptor(xq, [m, k], [k, 1], [bm, bk])
    wd = TensorDescriptor(w, [n, k], [k, 1], [bn, bk])
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    programs = tiles if grid_kind == "tiles" else min(tiles, sms)
    kernel = scaled_int8_gemm_tma_kernel[(programs,)]

    def call():
        kernel(xd, wd, xs, ws, ws, out, m, n, k, n, programs, XS_PER_TOKEN=True, WS_PER_CHANNEL=True,
               HAS_BIAS=False, OUT=tl.bfloat16, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm,
               FLATTEN=grid_kind == "persistent flat", PDL=False, num_warps=warps, num_stages=stages)
        return out

    return call


def main(ms, path):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    info = versions()
    print(info, "SMs", sms, "installed rows", g.int8_gemm_rows(0), flush=True)
    rows, fp8 = [], torch.float8_e4m3fn
    t0 = time.time()
    for label, (n, k) in SHAPES.items():
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        ws = torch.rand(n, 1, device="cuda") * 0.01 + 1e-3
        w8 = (torch.randn(n, k, device="cuda") * 4).to(fp8)
        wb = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        for m in ms:
            xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            xq[0].fill_(127)  # extreme values: a row of int8's largest
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, xq.device, True, True, False)
            installed = g.bind_triton_int8(p, w, ws, None)
            expected = installed(xq, xs)
            graph_us([lambda: installed(xq, xs)])  # thrown away: a shape's first timing reads high
            cand = {}
            for tile in TILES:
                for grid_kind in GRIDS:
                    name = f"{grid_kind} {tile}"
                    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
                    try:
                        call = tma_call(xq, w, xs, ws, out, tile, grid_kind, sms)
                        got = call()
                        torch.cuda.synchronize()
                    except Exception as exc:
                        cand[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
                        print(f"  {label} M={m} {name}: {cand[name]['error']}", flush=True)
                        continue
                    if not torch.equal(got.view(torch.int16), expected.view(torch.int16)):
                        raise SystemExit(f"{label} M={m} {name}: output differs from the installed call's")
                    cand[name] = {"us": graph_us([call])}
            t = {"installed": graph_us([lambda: installed(xq, xs)])}
            x8 = (torch.randn(m, k, device="cuda") * 4).to(fp8)
            one = torch.ones((), device="cuda")
            t["scaled_mm fp8"] = graph_us([lambda: torch._scaled_mm(x8, w8.t(), one, one, out_dtype=torch.bfloat16)])
            xb = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            t["bf16"] = graph_us([lambda: F.linear(xb, wb)])
            timed = {c: v["us"] for c, v in cand.items() if "us" in v}
            best = min(timed, key=timed.get)
            rows.append({"shape": label, "M": m, "N": n, "K": k, "us": t, "candidates": cand, "best": best})
            print(f"{label:7s} M={m:6d} installed {t['installed']:8.1f}  best TMA {timed[best]:8.1f} ({best})  "
                  f"fp8 {t['scaled_mm fp8']:8.1f}  bf16 {t['bf16']:8.1f}  [{time.time() - t0:.0f} s]", flush=True)
        del w, ws, w8, wb
        torch.cuda.empty_cache()
    summary = []
    for m in ms:
        at = [r for r in rows if r["M"] == m]
        sums = {}
        for name in at[0]["candidates"]:
            v = [r["candidates"].get(name, {}).get("us") for r in at]
            if all(x is not None for x in v):
                sums[name] = sum(v)
        best = min(sums, key=sums.get)
        per_shape = sum(min(r["candidates"][c]["us"] for c in r["candidates"] if "us" in r["candidates"][c]) for r in at)
        s = {"M": m, "installed": sum(r["us"]["installed"] for r in at), "best_one_config": best,
             "best_one_config_us": sums[best], "best_per_shape_us": per_shape,
             "fp8": sum(r["us"]["scaled_mm fp8"] for r in at), "bf16": sum(r["us"]["bf16"] for r in at),
             "by_grid": {gk: min(v for c, v in sums.items() if c.startswith(gk + " (")) for gk in GRIDS
                         if any(c.startswith(gk + " (") for c in sums)}}
        summary.append(s)
    with open(path, "w") as f:
        json.dump({"versions": info, "rows": rows, "summary": summary}, f, indent=1)
    print("\nsum over qkv, o, gate_up, down (us): installed | TMA best one config | TMA best per shape | fp8 | bf16")
    for s in summary:
        print(f"M={s['M']:6d} {s['installed']:9.1f} | {s['best_one_config_us']:9.1f} {s['best_one_config']} "
              f"({s['installed'] / s['best_one_config_us']:.3f}x) | {s['best_per_shape_us']:9.1f} | {s['fp8']:9.1f} | "
              f"{s['bf16']:9.1f}  by grid: " + ", ".join(f"{k} {v:.1f}" for k, v in s["by_grid"].items()))


if __name__ == "__main__":
    main([int(v) for v in sys.argv[1].split(",")], sys.argv[2])
