"""Round 33, run 3: the per-token quantizing call's absmax sweep in wide tiles (``gemm_launch.sweep_width``: 64
floats a thread, 4x-16x fewer steps on Llama-3-8B's gate_up rows) against BLOCK_K tiles, the sweep as before
("narrow"), and against no quantizing call ("off": the identity producer, then the GEMM), for int8 and FP8
per-token MLPs at 1 and 16 tokens; bf16 and FP8 static as anchors. Per turn and M: wall us per eager call
(timing.loop_us, peers in turns), host us per call (timing.host_us) and GPU us per call of graph replays, the
quantizing call let run under capture for the "(captured)" variants. Every variant's eager output and every captured
replay is compared with "off"'s, bit for bit. Arguments: turns, JSON path."""
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
KEYS = {"int8_token": K.kInt8DynamicTokenSym, "fp8_token": K.kFp8DynamicTokenSym}


@contextlib.contextmanager
def rule(mode: str, captured: bool = False):
    saved = g.quantizes_float_input, g.quantizing_under_capture, g.sweep_width
    if mode == "off":
        g.quantizes_float_input = lambda *a, **kw: False
    if mode == "narrow":
        g.sweep_width = lambda cfg, k: cfg["BLOCK_K"]
    if captured:
        g.quantizing_under_capture = lambda p, cfg: True
    g._GEMM_LAUNCHES._data.clear()  # no call built under another variant's rule
    try:
        yield
    finally:
        g.quantizes_float_input, g.quantizing_under_capture, g.sweep_width = saved
        g._GEMM_LAUNCHES._data.clear()


def built(key, ms, mode="on", captured=False, seed=None):
    if seed is not None:
        torch.manual_seed(seed)  # a key's variants get the same weights, so their outputs can be compared
    fns = decode._mlp(key, D, H, 2)
    with rule(mode, captured):
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
    captured = {}
    for name, key in KEYS.items():
        for mode in ("on", "narrow", "off"):
            peers[f"{name} {mode}"] = built(key, ms, mode, seed=1)
        for mode in ("on", "narrow"):
            captured[f"{name} {mode} (captured)"] = built(key, ms, mode, captured=True, seed=1)
    for m in ms:  # eager calls of every variant, and a replay of the captured ones, bitwise equal to "off"
        x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
        for name in KEYS:
            want = peers[f"{name} off"][0](x)
            for n, fns in {**peers, **captured}.items():
                if not n.startswith(name + " "):
                    continue
                got = fns[0](x)
                print(f"bits M={m} {n}: eager {'equal' if torch.equal(got, want) else 'DIFFER'}", flush=True)
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
            x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
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
