"""Where a decode call's host time goes (GPU, M = 1, Llama-3-8B MLP shapes): cProfile of back-to-back
bound calls (one QuantLinear given a QuantizedActivation, one given bf16, one producer call, the MLP)
per key, the functions with the most own time first, and the host cost of the primitives a call is
made of (``torch.empty``, a Triton direct launch, ``F.linear``).

Usage: python -m benchmarks.profile_host [--top N] [--calls N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import torch
from torch import nn

from benchmarks.timing import host_us
from fused_quant import QuantLinear, SiluAndMul, maybe_fused_act_quant
from fused_quant import keys as K

KEYS = {"fp8_static": K.kFp8StaticTensorSym, "fp8_token": K.kFp8DynamicTokenSym, "int8_token": K.kInt8DynamicTokenSym}


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
    d, h = 4096, 14336
    torch.manual_seed(0)
    gate_up = nn.Linear(d, 2 * h, bias=False, device="cuda", dtype=torch.bfloat16)
    down = nn.Linear(h, d, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(1, d, device="cuda", dtype=torch.bfloat16)
    hx = gate_up(x)
    act = SiluAndMul()
    ident = nn.Identity()
    prims = {"torch.empty": lambda: torch.empty((1, 2 * h), dtype=torch.bfloat16, device="cuda"),
             "F.linear bf16 gate_up": lambda: gate_up(x), "nn.Module call (identity)": lambda: ident(x),
             "x.view(-1, d)": lambda: x.view(-1, d)}
    for name, fn in prims.items():
        print(f"primitive {name}: {host_us(fn):.2f} us/call", flush=True)
    for name, key in KEYS.items():
        scale = 0.05 if K.is_static(key) else None
        qgu = QuantLinear.from_float(gate_up, key, scale, name="gate_up")
        qdown = QuantLinear.from_float(down, key, scale, name="down")
        qa = maybe_fused_act_quant(act, hx, qdown)
        calls = {"QuantLinear(qa) down": lambda: qdown(qa), "QuantLinear(x) gate_up": lambda: qgu(x),
                 "producer silu_mul": lambda: maybe_fused_act_quant(act, hx, qdown),
                 "mlp": lambda: qdown(maybe_fused_act_quant(act, qgu(x), qdown))}
        for cname, fn in calls.items():
            print(f"=== {name} {cname}: {host_us(fn):.2f} us/call", flush=True)
            print(profile(fn, args.calls, args.top), flush=True)


if __name__ == "__main__":
    main()
