"""Twenty-sixth round, run 4: each small-M row run 1's search changed at 32 / 64 tokens, old config against new,
taking turns in one process (5 turns, the order flipped each turn), GPU us per call replayed from a CUDA graph over
weight copies (the sweep's timing); the old configs are those of the table before 6fed4a2 (run4_old_rows.json)."""
import json
import statistics
import sys

import torch

from benchmarks.decode import SHAPES, _weights, copies_for
from benchmarks.sweep_small_m_gemm import _activation
from benchmarks.timing import graph_us
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

F = g.CONFIG_FIELDS
old = {(r["kind"], r["shape"], r["m"]): {f: r[f] for f in F} for r in json.load(open(sys.argv[1]))["rows"]}
new = {(r["kind"], r["shape"], r["m"]): {f: r[f] for f in F} for r in json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"]}
changed = sorted(key for key in new if key in old and new[key] != old[key] and key[2] in (32, 64))
out = []
for kind, shape, m in changed:
    n, k = SHAPES[shape]
    weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
    xq, xs, _ = _activation(kind, m, k)
    p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    calls = {which: [g.bind_small_m(p, w, ws, None, cfg[(kind, shape, m)]) for w, ws in weights]
             for which, cfg in (("old", old), ("new", new))}
    res = {c: calls[c][0](xq, xs) for c in calls}
    same = bool(torch.equal(res["old"], res["new"]))
    times = {"old": [], "new": []}
    for turn in range(5):
        for which in (("old", "new") if turn % 2 == 0 else ("new", "old")):
            times[which].append(graph_us([lambda c=c: c(xq, xs) for c in calls[which]]))
    row = dict(kind=kind, shape=shape, m=m, old=old[(kind, shape, m)], new=new[(kind, shape, m)], bits_equal=same,
               old_us=times["old"], new_us=times["new"])
    out.append(row)
    print(f"{kind:4s} {shape:7s} M={m:3d} old {statistics.median(times['old']):6.2f} new "
          f"{statistics.median(times['new']):6.2f} us (medians of 5; min {min(times['old']):.2f} / "
          f"{min(times['new']):.2f}) bits equal {same}", flush=True)
    del weights
    torch.cuda.empty_cache()
json.dump(out, open(sys.argv[2], "w"), indent=1)
