"""Forty-second round, run 2: which state before the capture makes the int8 per-token MLP's graph replay slow at 1024
tokens. Run 1 (an H100) timed it with a reset before each capture: 316.9 us cold, FP8 per-token 317.4, and under
three seconds of sustained replays at the power cap 344.4 against FP8's 349.3, where ``bench mlp`` reads int8 much
slower than FP8 (the fortieth round's run 6: the bench's sequence 356.5 us, after a reset 321.1). States, each
entered from ``fused_quant.reset()``, the MLPs' graphs captured and timed as ``bench mlp`` does (``graph_us``, eight
calls, int8 and FP8 per-token in turns):

- ``reset``: nothing before the capture;
- ``eager 1024``: ``bench mlp``'s eager loop at 1024 tokens first (``loop_us``, 40 ms x 7);
- ``smaller M``: ``bench mlp``'s sequence at 1 / 16 / 64 / 256 tokens first (an eager loop, then graph turns, per M);
- ``bench``: the smaller M's sequence, then the eager loop at 1024 tokens (``bench mlp`` up to its graph at 1024);
- ``bench + empty_cache``: as ``bench``, then ``torch.cuda.empty_cache()`` before the capture.

Three turns, the states' order rotated; then one replay of each state's graph profiled per kernel (``trace_mlp``'s
critical path) for ``reset`` and ``bench``. Output bits of int8 are compared across states.

Usage: python run2_state.py OUT.json
"""

import json
import statistics
import sys

import torch

import fused_quant
from benchmarks import decode, trace_mlp
from benchmarks.timing import graph_us, loop_us, versions
from fused_quant import keys as K

M = 1024
SMALL = (1, 16, 64, 256)


def main():
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    mlps = {"fp8_token": decode._mlp(K.kFp8DynamicTokenSym, d, h, 2),
            "int8_token": decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)}
    xs = {m: torch.randn(m, d, device="cuda", dtype=torch.bfloat16) for m in (*SMALL, M)}
    x = xs[M]

    def eager(m):
        loop_us({name: (lambda fns=fns: fns[0](xs[m])) for name, fns in mlps.items()})

    def smaller():
        for m in SMALL:
            eager(m)
            for fns in mlps.values():
                graph_us([lambda f=f, m=m: f(xs[m]) for f in fns], calls=8)

    states = {"reset": lambda: None, "eager 1024": lambda: eager(M), "smaller M": smaller,
              "bench": lambda: (smaller(), eager(M)),
              "bench + empty_cache": lambda: (smaller(), eager(M), torch.cuda.empty_cache())}
    names = list(states)
    times = {s: {p: [] for p in mlps} for s in names}
    bits = {}
    result = {"versions": versions(), "M": M}
    print(result["versions"], flush=True)
    for turn in range(3):
        for state in names[turn:] + names[:turn]:
            fused_quant.reset()
            states[state]()
            for peer in (list(mlps) if turn % 2 == 0 else list(mlps)[::-1]):
                fns = mlps[peer]
                times[state][peer].append(graph_us([lambda f=f: f(x) for f in fns], calls=8))
            bits.setdefault(state, mlps["int8_token"][0](x).view(torch.int16))
            print(f"turn {turn} {state:22s} " + "  ".join(f"{p} {times[state][p][-1]:7.1f}" for p in mlps),
                  flush=True)
    ref = bits["reset"]
    result["same_bits"] = {s: bool(torch.equal(b, ref)) for s, b in bits.items()}
    result["graph_us"] = times
    result["traces"] = {}
    for state in ("reset", "bench"):
        fused_quant.reset()
        states[state]()
        for peer, fns in mlps.items():
            row = trace_mlp.critical_path(trace_mlp.kernel_records(lambda f=fns[0]: f(x), 8), 8)
            result["traces"][f"{state} {peer}"] = row
            print(f"trace {state:6s} " + trace_mlp.render_row({"M": M, "peer": peer, **row}), flush=True)
    json.dump(result, open(sys.argv[1], "w"), indent=1)
    print(f"\nint8 bits equal across states: {result['same_bits']}")
    print("medians over turns, us per MLP (graph replay, 1024 tokens):")
    for state in names:
        med = {p: statistics.median(v) for p, v in times[state].items()}
        print(f"  {state:22s} fp8_token {med['fp8_token']:7.1f}  int8_token {med['int8_token']:7.1f}  "
              f"int8 / fp8 {med['int8_token'] / med['fp8_token']:.3f}")


if __name__ == "__main__":
    main()
