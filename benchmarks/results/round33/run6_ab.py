"""Round 33, run 6 (planned, not run yet): where the per-token quantizing call's remaining replay cost over the
producer then the GEMM (7.8-9.1 us at one token on runs 3 and 5) goes. The call's programs sweep their rows for the
absmax after the grid dependency wait and before their weight stream starts; they ask L2 for the first lines of
their weight rows before the wait (``PREFETCH_BYTES`` over all programs, 4 MB). Variants of the int8 and FP8
per-token MLPs at 1 and 16 tokens: the package ("on"), the prefetch budget at 16 and 32 MB ("pf16", "pf32": more of
the weight in L2 while the sweep runs), and no quantizing call ("off"); eager, host and graph columns as run3_ab.py,
the captured variants of each "on"; every output against "off", bit for bit. Arguments: turns, JSON path."""
import contextlib
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

from benchmarks.timing import graph_us, host_us, loop_us, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

_spec = importlib.util.spec_from_file_location("run3_ab", Path(__file__).parent / "run3_ab.py")
run3_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run3_ab)
_rule = run3_ab.rule
PREFETCH = {"pf16": 16 << 20, "pf32": 32 << 20}
MODES = ("on", "pf16", "pf32", "off")


@contextlib.contextmanager
def rule(mode: str, captured: bool = False):
    saved = g.PREFETCH_BYTES
    g.PREFETCH_BYTES = PREFETCH.get(mode, saved)
    try:
        with _rule("on" if mode in PREFETCH else mode, captured):
            yield
    finally:
        g.PREFETCH_BYTES = saved


run3_ab.rule = rule  # what run3_ab.built binds under


def main():
    ms = (1, 16)
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    torch.manual_seed(0)
    peers = {"bf16": run3_ab.built(None, ms)}
    captured = {}
    for name, key in run3_ab.KEYS.items():
        for mode in MODES:
            peers[f"{name} {mode}"] = run3_ab.built(key, ms, mode, seed=1)
        for mode in MODES[:-1]:
            captured[f"{name} {mode} (captured)"] = run3_ab.built(key, ms, mode, captured=True, seed=1)
    for m in ms:
        x = torch.randn(m, run3_ab.D, device="cuda", dtype=torch.bfloat16)
        for name in run3_ab.KEYS:
            want = peers[f"{name} off"][0](x)
            for n, fns in {**peers, **captured}.items():
                if not n.startswith(name + " "):
                    continue
                print(f"bits M={m} {n}: eager {'equal' if torch.equal(fns[0](x), want) else 'DIFFER'}", flush=True)
                if n.endswith("(captured)"):
                    graph = torch.cuda.CUDAGraph()
                    static_x = x.clone()
                    with torch.cuda.graph(graph):
                        out = fns[0](static_x)
                    graph.replay()
                    torch.cuda.synchronize()
                    print(f"bits M={m} {n}: replay {'equal' if torch.equal(out, want) else 'DIFFER'}", flush=True)
    rows = []
    for turn in range(turns):
        for m in ms:
            x = torch.randn(m, run3_ab.D, device="cuda", dtype=torch.bfloat16)
            eager = loop_us({n: (lambda fns=fns: fns[0](x)) for n, fns in peers.items()}, target_ms=40, rounds=7)
            host = {n: host_us(lambda fns=fns: fns[0](x)) for n, fns in peers.items()}
            graph = {n: graph_us([lambda f=f: f(x) for f in fns], calls=8) for n, fns in {**peers, **captured}.items()}
            rows.append(dict(turn=turn, M=m, eager_us=eager, host_us=host, graph_us=graph))
            for c, v in (("eager", eager), ("host ", host), ("graph", graph)):
                print(f"turn {turn} M={m:3d} {c} " + "  ".join(f"{n} {u:6.1f}" for n, u in v.items()), flush=True)
    json.dump({"versions": versions(), "rows": rows}, open(sys.argv[2] if len(sys.argv) > 2 else "ab.json", "w"),
              indent=1)
    print("median over turns (eager / host / graph us):")
    for m in ms:
        sel = [r for r in rows if r["M"] == m]
        for n in list(peers) + list(captured):
            med = [statistics.median(r[c][n] for r in sel) if n in sel[0][c] else float("nan")
                   for c in ("eager_us", "host_us", "graph_us")]
            print(f"M={m:3d} {n:28s} " + " / ".join(f"{v:6.1f}" for v in med))


if __name__ == "__main__":
    main()
