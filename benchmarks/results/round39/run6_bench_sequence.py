"""Thirty-ninth round, run 6: the int8 per-token MLP at 1024 tokens read 356-372 us in ``bench mlp`` (runs 2-5) and
310-331 us in the A/Bs and trace_mlp (runs 2-4) on H100s. The bench's sequence on its own MLPs (the SQNR pass, the
eager loops, graph replays in turns), then the kernels one graph replay of those MLPs runs (torch.profiler: name,
count, mean duration), then the same after ``fused_quant.reset()`` (every layer binds again), timed and profiled
again."""

import collections

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import captured, loop_us
from fused_quant import keys as K

M = 1024


def kernels(fns) -> list:
    graph = captured(fns, 4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    agg = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            agg[e.name[:60]].append(e.device_time)
    return sorted(((n, len(v), round(sum(v) / len(v), 1)) for n, v in agg.items()), key=lambda r: -r[2])


def main():
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    peers = {"bf16": decode._mlp(None, d, h, 2), "int8_token": decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)}
    decode.mlp_sqnr([M], {"int8_token": K.kInt8DynamicTokenSym}, d, h)
    x = torch.randn(M, d, device="cuda", dtype=torch.bfloat16)
    eager = loop_us({name: (lambda fns=fns: fns[0](x)) for name, fns in peers.items()})
    fns = {name: [lambda f=f: f(x) for f in v] for name, v in peers.items()}
    print("bench sequence: eager", {k: round(v, 1) for k, v in eager.items()},
          "graph", {k: round(v, 1) for k, v in decode.graph_turns(fns, calls=8).items()}, flush=True)
    for row in kernels(fns["int8_token"]):
        print("   ", row, flush=True)
    fused_quant.reset()
    for f in peers["int8_token"]:
        f(x)
    print("after reset: graph", {k: round(v, 1) for k, v in decode.graph_turns(fns, calls=8).items()}, flush=True)
    for row in kernels(fns["int8_token"]):
        print("   ", row, flush=True)
    print("graph again", {k: round(v, 1) for k, v in decode.graph_turns(fns, calls=8).items()}, flush=True)


if __name__ == "__main__":
    main()
