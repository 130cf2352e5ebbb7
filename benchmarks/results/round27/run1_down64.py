"""Twenty-seventh round, run 1: down (N = 4096, K = 14336) at 64 tokens, FP8 and int8, over 64-token tiles the sweep
does not try (more stages, 8 warps, 32-wide weight blocks, 128-wide with 4 splits); then the three fastest of each kind
and the installed row taking turns (5 turns, order flipped each turn), GPU us per call replayed from a CUDA graph over
weight copies (the sweep's timing), each against float64 (the sweep's bound) and its bits against the installed row's."""
import dataclasses
import json
import statistics
import sys

import torch

from benchmarks.decode import SHAPES, _weights, copies_for
from benchmarks.sweep_small_m_gemm import _activation, _error, error_bound, torch_times
from benchmarks.timing import graph_us
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

M, SHAPE = 64, "down"
# (BLOCK_N, BLOCK_K, num_warps, num_stages); shared memory per stage (BLOCK_N + 64) * BLOCK_K bytes, 227 KB at most
TILES = ((64, 256, 4, 4), (64, 256, 4, 5), (64, 256, 4, 6), (64, 256, 8, 4), (64, 256, 8, 5), (64, 128, 4, 8),
         (64, 128, 4, 10), (64, 128, 4, 12), (64, 512, 4, 3), (64, 512, 8, 3), (32, 256, 4, 6), (32, 512, 4, 4),
         (128, 128, 8, 6), (128, 256, 4, 3), (128, 256, 8, 3))
installed = {(r["kind"], r["shape"], r["m"]): {f: r[f] for f in g.CONFIG_FIELDS}
             for r in json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"]}
n, k = SHAPES[SHAPE]
out = []
for kind in ("int8", "fp8"):
    weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
    xq, xs, xs_ten = _activation(kind, M, k)
    w, ws = weights[0]
    p = GemmProblem(M, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    tt = torch_times(p, xq, xs, xs_ten, weights)
    now = installed[(kind, SHAPE, M)]
    trials = []
    for bn, bk, warps, stages in TILES:
        for splits in (1, 2, 4):
            cfg = dict(BLOCK_N=bn, BLOCK_M=M, BLOCK_K=bk, splits=splits, num_warps=warps, num_stages=stages)
            try:
                calls = [g.bind_small_m(p, w_, ws_, None, cfg) for w_, ws_ in weights]
                calls[0](xq, xs)
                us = graph_us([lambda c=c: c(xq, xs) for c in calls])
            except Exception as exc:  # shared memory or registers the GPU cannot hold
                print(f"  skip {cfg}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
                continue
            trials.append((us, cfg))
            print(f"  {kind} {SHAPE} M={M} {us:8.2f} us  {cfg}", flush=True)
    trials.sort(key=lambda t: t[0])
    top = [cfg for _, cfg in trials if cfg != now][:3]
    p32 = dataclasses.replace(p, out_dtype=torch.float32)
    ref = g.bind_small_m(p, w, ws, None, now)(xq, xs)
    cands = {"installed": now, **{f"top{i + 1}": c for i, c in enumerate(top)}}
    calls = {name: [g.bind_small_m(p, w_, ws_, None, c) for w_, ws_ in weights] for name, c in cands.items()}
    times = {name: [] for name in cands}
    for turn in range(5):
        for name in (list(cands) if turn % 2 == 0 else list(cands)[::-1]):
            times[name].append(graph_us([lambda c=c: c(xq, xs) for c in calls[name]]))
    for name, c in cands.items():
        err = _error(g.bind_small_m(p32, w, ws, None, c)(xq, xs), xq, xs, w, ws)
        same = bool(torch.equal(calls[name][0](xq, xs), ref))
        med = statistics.median(times[name])
        row = dict(kind=kind, shape=SHAPE, m=M, which=name, cfg=c, us=times[name], err=err,
                   within_bound=err <= error_bound(kind, k), bits_equal_installed=same, torch=tt)
        out.append(row)
        print(f"{kind:4s} {SHAPE} M={M} {name:9s} median {med:6.2f} min {min(times[name]):6.2f} us "
              f"({n * k / (med * 1e-6) / 1e12:.3f} TB/s) err {err:.1e} ok {row['within_bound']} bits= {same} {c}",
              flush=True)
    print(f"{kind:4s} torch peers: " + ", ".join(f"{name} {v:.2f}" for name, v in tt.items()), flush=True)
    del weights, calls
    torch.cuda.empty_cache()
json.dump(out, open(sys.argv[1], "w"), indent=1)
