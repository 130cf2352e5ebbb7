"""Twenty-seventh round, run 4: run 1's three fastest int8 down tiles at 64 tokens (five stages; five stages with 8
warps; 64 x 128 with eight stages) against each installed row at 32 / 64 tokens of one token block (BLOCK_M 32 / 64),
both kinds, every shape, with the row's token block and split count; taking turns (5 turns, order flipped each turn),
GPU us per call replayed from a CUDA graph over weight copies (the sweep's timing), each against float64 (the sweep's
bound) and its bits against the installed row's."""
import dataclasses
import json
import statistics
import sys

import torch

from benchmarks.decode import SHAPES, _weights, copies_for
from benchmarks.sweep_small_m_gemm import _activation, _error, error_bound
from benchmarks.timing import graph_us
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

TILES = ((64, 256, 4, 5), (64, 256, 8, 5), (64, 128, 4, 8))  # (BLOCK_N, BLOCK_K, num_warps, num_stages)
rows = [r for r in json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"] if r["m"] in (32, 64) and r["BLOCK_M"] >= 32]
out = []
for row in rows:
    kind, shape, m = row["kind"], row["shape"], row["m"]
    n, k = SHAPES[shape]
    now = {f: row[f] for f in g.CONFIG_FIELDS}
    cands = {"installed": now}
    for bn, bk, warps, stages in TILES:
        cfg = dict(now, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
        if cfg != now:
            cands[f"{bn}x{bk} w{warps} s{stages}"] = cfg
    weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
    xq, xs, _ = _activation(kind, m, k)
    w, ws = weights[0]
    p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    p32 = dataclasses.replace(p, out_dtype=torch.float32)
    calls = {name: [g.bind_small_m(p, w_, ws_, None, c) for w_, ws_ in weights] for name, c in cands.items()}
    ref = calls["installed"][0](xq, xs)
    times = {name: [] for name in cands}
    for turn in range(5):
        for name in (list(cands) if turn % 2 == 0 else list(cands)[::-1]):
            times[name].append(graph_us([lambda c=c: c(xq, xs) for c in calls[name]]))
    base = statistics.median(times["installed"])
    for name, c in cands.items():
        err = _error(g.bind_small_m(p32, w, ws, None, c)(xq, xs), xq, xs, w, ws)
        same = bool(torch.equal(calls[name][0](xq, xs), ref))
        med = statistics.median(times[name])
        out.append(dict(kind=kind, shape=shape, m=m, which=name, cfg=c, us=times[name], err=err,
                        within_bound=err <= error_bound(kind, k), bits_equal_installed=same,
                        torch_us=row["torch_us"], torch=row["torch"]))
        print(f"{kind:4s} {shape:7s} M={m:3d} {name:18s} median {med:6.2f} min {min(times[name]):6.2f} us "
              f"({med - base:+.2f}) err {err:.1e} ok {err <= error_bound(kind, k)} bits= {same}", flush=True)
    del weights, calls
    torch.cuda.empty_cache()
json.dump(out, open(sys.argv[1], "w"), indent=1)
