"""Forty-seventh round, run 6: graph replay timed with and without a lead (``timing.lead``: a spin kernel queued before
each window's start event, so that the host's launch of the graph lies outside the window). ``bench gemm``'s rows at
M = 1 / 16 and ``bench mlp``'s at M = 1 / 16 / 256 (no sustained turns), with the lead off, then on (a short lease:
one turn each); one JSON and a table of each arm's times."""

import json
import os
import sys

from benchmarks import decode, timing

OUT = sys.argv[1]
spin = timing.lead
arms = {"off": lambda: None, "on": spin}
runs = {"gemm": {}, "mlp": {}}
ceiling = None
for turn in range(1):
    for arm, fn in arms.items():
        timing.lead = fn
        g = decode.bench_gemm(ms=(1, 16), ceiling=ceiling)
        ceiling = ceiling or g["ceiling_GBps"]  # do_bench's copy (no graph): measured once
        m = decode.bench_mlp(ms=(1, 16, 256), sustained_s=0)
        runs["gemm"].setdefault(arm, []).append(g)
        runs["mlp"].setdefault(arm, []).append(m)
timing.lead = spin
with open(os.path.join(OUT, "lead_ab.json"), "w") as f:
    json.dump(runs, f)


def least(docs, key):
    out = {}
    for doc in docs:
        for row in doc["rows"]:
            where = (row.get("shape", "mlp"), row.get("kind", ""), row["M"])
            for peer, us in row[key].items():
                cell = out.setdefault(where, {})
                cell[peer] = min(us, cell.get(peer, us))
    return out


print("| where | peer | lead off us | lead on us | on / off |")
print("|---|---|---|---|---|")
for kind, key in (("gemm", "us"), ("mlp", "graph_us")):
    off, on = least(runs[kind]["off"], key), least(runs[kind]["on"], key)
    for where in off:
        for peer in off[where]:
            a, b = off[where][peer], on[where][peer]
            print(f"| {' '.join(map(str, where))} | {peer} | {a:.2f} | {b:.2f} | {b / a:.3f} |")
