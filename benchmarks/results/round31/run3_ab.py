"""Round 31, run 3: eager per-token QuantLinear(x) quantizing its float input in the small-M GEMM ("on", the rule
of e63cfba, set here whatever the tree's) against the identity producer then the GEMM ("off"), Llama-3-8B MLP at 1 and 16 tokens, in turns with
bf16 and FP8 static; wall us per eager call (timing.loop_us, peers in turns), host us per call (timing.host_us)
and GPU us per call of graph replays where the quantizing call is let run under capture too ("on") or not ("off")."""
import contextlib
import json
import statistics
import sys

import torch

from benchmarks import decode
from benchmarks.timing import graph_us, host_us, loop_us, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

D, H = 4096, 14336


def e63cfba_rule(cfg, m, kind, *rest):
    """quantizes_float_input as of e63cfba: one token block of at most 16 tokens, FP8 in MMA blocks only, any key."""
    return m <= cfg["BLOCK_M"] and g.quantizes_float_tiles(cfg, kind)


@contextlib.contextmanager
def rule(on: bool, captured: bool = False):
    saved = g.quantizes_float_input, g.quantizing_under_capture
    g.quantizes_float_input = e63cfba_rule if on else (lambda *a, **kw: False)
    if captured:
        g.quantizing_under_capture = lambda p, cfg: True
    try:
        yield
    finally:
        g.quantizes_float_input, g.quantizing_under_capture = saved


def built(key, ms, on=True, captured=False):
    fns = decode._mlp(key, D, H, 2)
    with rule(on, captured):
        for m in ms:
            x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
            for f in fns:
                f(x)
    torch.cuda.synchronize()
    return fns


def main():
    ms = (1, 16)
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    torch.manual_seed(0)
    peers = {"bf16": built(None, ms), "fp8_static": built(K.kFp8StaticTensorSym, ms)}
    for name, key in (("fp8_token", K.kFp8DynamicTokenSym), ("int8_token", K.kInt8DynamicTokenSym)):
        peers[f"{name} on"] = built(key, ms, on=True)
        peers[f"{name} off"] = built(key, ms, on=False)
    graph_on = {name: built(key, ms, on=True, captured=True)
                for name, key in (("fp8_token", K.kFp8DynamicTokenSym), ("int8_token", K.kInt8DynamicTokenSym))}
    rows = []
    for turn in range(turns):
        for m in ms:
            x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
            eager = loop_us({n: (lambda fns=fns: fns[0](x)) for n, fns in peers.items()}, target_ms=40, rounds=7)
            host = {n: host_us(lambda fns=fns: fns[0](x)) for n, fns in peers.items()}
            graph = {n: graph_us([lambda f=f: f(x) for f in fns], calls=8) for n, fns in peers.items()}
            for n, fns in graph_on.items():
                graph[f"{n} on (captured)"] = graph_us([lambda f=f: f(x) for f in fns], calls=8)
            rows.append(dict(turn=turn, M=m, eager_us=eager, host_us=host, graph_us=graph))
            print(f"turn {turn} M={m:3d} eager " + "  ".join(f"{n} {v:6.1f}" for n, v in eager.items()), flush=True)
            print(f"turn {turn} M={m:3d} host  " + "  ".join(f"{n} {v:6.1f}" for n, v in host.items()), flush=True)
            print(f"turn {turn} M={m:3d} graph " + "  ".join(f"{n} {v:6.1f}" for n, v in graph.items()), flush=True)
    json.dump({"versions": versions(), "rows": rows}, open(sys.argv[2] if len(sys.argv) > 2 else "ab.json", "w"),
              indent=1)
    print("median over turns (eager / host / graph us):")
    for m in ms:
        sel = [r for r in rows if r["M"] == m]
        for n in list(peers) + [f"{n} on (captured)" for n in graph_on]:
            med = [statistics.median(r[c][n] for r in sel) if n in sel[0][c] else float("nan")
                   for c in ("eager_us", "host_us", "graph_us")]
            print(f"M={m:3d} {n:26s} " + " / ".join(f"{v:6.1f}" for v in med))


if __name__ == "__main__":
    main()
