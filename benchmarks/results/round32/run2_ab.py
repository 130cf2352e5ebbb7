"""Round 32, run 2 (round 31 run 4's A/B on a tree with gemm_launch.quantizing_config, which "on" turns off):
int8 per-token's eager gate_up call quantizing its float input in the small-M GEMM with the
table's row ("on": at one token the one-token row, 2 weight rows a program; at 16 tokens 64 rows a program), with
the table's 2-token row instead ("wide": an MMA block of 256 weight rows a program, so 112 programs sweep the token
rows for their absmax where there were 14336 / 448; int8 sums are exact, so any config gives the same bits), or
not at all ("off": the identity producer, then the GEMM); FP8 static and bf16 as anchors. Per turn and M: wall us
per eager call (timing.loop_us, peers in turns), host us per call (timing.host_us) and GPU us per call of graph
replays, the quantizing call let run under capture for the "(captured)" variants."""
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
TABLE_CONFIG = g.small_m_config


def e63cfba_rule(cfg, m, kind, *rest):
    """quantizes_float_input as of e63cfba: one token block of at most 16 tokens, FP8 in MMA blocks only, any key."""
    return m <= cfg["BLOCK_M"] and g.quantizes_float_tiles(cfg, kind)


def wide_config(arch, kind, n, k, m, peers=None):
    """gate_up's (N = 2H) table row at 2 tokens for int8 at up to 16 tokens; every other lookup as the table's."""
    if kind == "int8" and n == 2 * H and m <= 16:
        return TABLE_CONFIG(arch, kind, n, k, 2, peers)
    return TABLE_CONFIG(arch, kind, n, k, m, peers)


@contextlib.contextmanager
def rule(mode: str, captured: bool = False):
    saved = g.quantizes_float_input, g.quantizing_under_capture, g.small_m_config, g.quantizing_config
    g.quantizes_float_input = (lambda *a, **kw: False) if mode == "off" else e63cfba_rule
    if mode == "on":
        g.quantizing_config = lambda p, cfg, arch: cfg  # the table's own row, as before quantizing_config
    if mode == "wide":
        g.small_m_config = wide_config
    if captured:
        g.quantizing_under_capture = lambda p, cfg: True
    try:
        yield
    finally:
        g.quantizes_float_input, g.quantizing_under_capture, g.small_m_config, g.quantizing_config = saved


def built(key, ms, mode="on", captured=False, seed=None):
    if seed is not None:
        torch.manual_seed(seed)  # the int8 variants get the same weights, so their outputs can be compared
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
    key = K.kInt8DynamicTokenSym
    peers = {"bf16": built(None, ms), "fp8_static": built(K.kFp8StaticTensorSym, ms)}
    for mode in ("on", "wide", "off"):
        peers[f"int8_token {mode}"] = built(key, ms, mode, seed=1)
    graph_on = {f"int8_token {mode} (captured)": built(key, ms, mode, captured=True, seed=1) for mode in ("on", "wide")}
    variants = {n: fns for n, fns in {**peers, **graph_on}.items() if n.startswith("int8")}
    for m in ms:  # eager calls of every variant, and a replay of the captured ones, bitwise equal to "off"
        x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
        want = variants["int8_token off"][0](x)
        for n, fns in variants.items():
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
            graph = {n: graph_us([lambda f=f: f(x) for f in fns], calls=8) for n, fns in {**peers, **graph_on}.items()}
            rows.append(dict(turn=turn, M=m, eager_us=eager, host_us=host, graph_us=graph))
            print(f"turn {turn} M={m:3d} eager " + "  ".join(f"{n} {v:6.1f}" for n, v in eager.items()), flush=True)
            print(f"turn {turn} M={m:3d} host  " + "  ".join(f"{n} {v:6.1f}" for n, v in host.items()), flush=True)
            print(f"turn {turn} M={m:3d} graph " + "  ".join(f"{n} {v:6.1f}" for n, v in graph.items()), flush=True)
    json.dump({"versions": versions(), "rows": rows}, open(sys.argv[2] if len(sys.argv) > 2 else "ab.json", "w"),
              indent=1)
    print("median over turns (eager / host / graph us):")
    for m in ms:
        sel = [r for r in rows if r["M"] == m]
        for n in list(peers) + list(graph_on):
            med = [statistics.median(r[c][n] for r in sel) if n in sel[0][c] else float("nan")
                   for c in ("eager_us", "host_us", "graph_us")]
            print(f"M={m:3d} {n:28s} " + " / ".join(f"{v:6.1f}" for v in med))


if __name__ == "__main__":
    main()
