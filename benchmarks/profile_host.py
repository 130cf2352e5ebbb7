"""Where a decode call's host time goes (GPU, M = 1, Llama-3-8B MLP shapes): cProfile of back-to-back
calls (``decode.host_calls``: those ``fused-quant bench host`` times), the functions with the most own
time first, and the host cost of the primitives a call is made of (allocations, a view, a module call).

Usage: python -m benchmarks.profile_host [--top N] [--calls N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import torch

from benchmarks.decode import host_calls
from benchmarks.timing import host_us


def profile(fn, calls: int, top: int) -> str:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for i in range(calls):
        fn()
        if i % 100 == 99:
            torch.cuda.synchronize()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    t = torch.empty(1, device="cuda")
    dev = t.device
    prims = {"torch.empty": lambda: torch.empty((1, 28672), dtype=torch.bfloat16, device=dev),
             "torch.empty_strided": lambda: torch.empty_strided((1, 28672), (28672, 1), dtype=torch.bfloat16,
                                                                device=dev),
             "nn.Module call (identity)": lambda m=torch.nn.Identity(): m(t), "t.view(-1)": lambda: t.view(-1),
             "t.data_ptr()": lambda: t.data_ptr()}
    for name, fn in prims.items():
        print(f"primitive {name}: {host_us(fn):.2f} us/call", flush=True)
    calls, _ = host_calls()
    for name, fns in calls.items():
        for cname, fn in fns.items():
            print(f"=== {name} {cname}: {host_us(fn):.2f} us/call", flush=True)
            print(profile(fn, args.calls, args.top), flush=True)


if __name__ == "__main__":
    main()
