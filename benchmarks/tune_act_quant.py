"""Launch-config sweep for the act+quant kernels on this GPU (feeds fused_quant/kernels/heuristics.py).

``python -m benchmarks.tune_act_quant [M] [H] [filter]`` from the checkout root: times each candidate
config (median us, GB/s, % of the copy ceiling) for static and per-token producers; every candidate's
output is checked bitwise against the heuristic config's output first.
"""

import argparse

import torch
import triton

from benchmarks.timing import copy_ceiling, require_gpu
from fused_quant import keys as K
from fused_quant.flags import whole_number
from fused_quant.kernels.launch import launch_act_quant

STATIC = [dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w) for bm, bn, w in
          [(8, 1024, 8), (1, 4096, 8), (2, 2048, 8), (1, 2048, 4), (2, 1024, 4), (4, 1024, 4), (1, 1024, 4),
           (4, 2048, 8), (1, 8192, 16), (2, 4096, 16)]]
FLAT = [dict(flat=1, BLOCK=b, num_warps=w) for b, w in [(2048, 4), (4096, 4), (4096, 8), (8192, 8), (8192, 16)]]
FLAT_DIV = [dict(flat=1, BLOCK=4096, num_warps=4, fast_div=f) for f in (0, 1)]  # per-element div_rn vs _quotient
TOKEN_ONE = [dict(variant="rows", ROWS=1, BLOCK_N=16384, num_warps=w) for w in (8, 16, 32)]
TOKEN_CHUNKS = [dict(variant="chunks", CHUNK=c, num_warps=w) for c, w in [(2048, 8), (2048, 16), (2048, 32), (1024, 8)]]
TOKEN_TWO = [dict(variant="two_pass", BLOCK_N=bn, num_warps=w, STAGES=st)
             for bn, w in [(1024, 4), (2048, 8)] for st in (1, 3)]
TOKEN_PERSIST = [dict(variant="persistent", BLOCK_N=bn, num_warps=w, programs_per_sm=p, scratch=sc, STAGES=st)
                 for sc in (1, 0) for bn, w in [(1024, 4), (2048, 8)] for p in (4, 8) for st in (1, 2, 3)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune_act_quant", description=__doc__.split("\n\n")[0])
    ap.add_argument("m", nargs="?", type=whole_number, default=8192, help="tokens (default: 8192)")
    ap.add_argument("h", nargs="?", type=whole_number, default=14336,
                    help="the activation's output width (default: 14336)")
    ap.add_argument("only", nargs="?", default="", help="time only the cases whose 'act key' holds this text")
    args = ap.parse_args(argv)
    m, h, only = args.m, args.h, args.only
    cases = [("relu2", "fp8_static_tensor", STATIC + FLAT), ("relu2", "int8_static_tensor", STATIC[:1] + FLAT + FLAT_DIV),
             ("silu_and_mul", "fp8_static_tensor", STATIC),
             ("silu_and_mul", "int8_dynamic_token", TOKEN_ONE + TOKEN_CHUNKS + TOKEN_TWO + TOKEN_PERSIST),
             ("silu_and_mul", "fp8_dynamic_token", TOKEN_ONE + TOKEN_CHUNKS + TOKEN_TWO + TOKEN_PERSIST),
             ("relu2", "int8_dynamic_token", TOKEN_ONE + TOKEN_CHUNKS + TOKEN_TWO + TOKEN_PERSIST),
             ("relu2", "fp8_dynamic_token", TOKEN_ONE + TOKEN_CHUNKS + TOKEN_TWO + TOKEN_PERSIST)]
    picked = [(act, key_name, configs) for act, key_name, configs in cases if only in f"{act} {key_name}"]
    if not picked:  # nothing would be timed, and the run would look like one that passed
        ap.error(f"no case's 'act key' holds {only!r}; the cases are "
                 + ", ".join(f"'{act} {key_name}'" for act, key_name, _ in cases))
    require_gpu(ap, "tune_act_quant")
    ceiling = copy_ceiling(False)
    print(f"copy ceiling {ceiling:.0f} GB/s; M={m} H={h}")
    for act, key_name, configs in picked:
        key = K.KEYS[key_name]
        d_in = 2 * h if act == "silu_and_mul" else h
        x = torch.randn(m, d_in, device="cuda").to(torch.bfloat16)
        scale = torch.tensor([0.05], device="cuda") if K.is_static(key) else None
        nbytes = x.numel() * 2 + m * h + (4 * m if K.is_per_token(key) else 0)
        base = launch_act_quant(x, act, key, scale, True, torch.float8_e4m3fn)
        for cfg in configs:
            if cfg.get("BLOCK_N", 0) < h and cfg.get("variant") == "rows":
                continue
            out = launch_act_quant(x, act, key, scale, True, torch.float8_e4m3fn, cfg)
            same = all(torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 else a, b.view(torch.uint8)
                                   if b.dtype.itemsize == 1 else b) for a, b in zip(out, base))
            us = 1e3 * triton.testing.do_bench(
                lambda: launch_act_quant(x, act, key, scale, True, torch.float8_e4m3fn, cfg), return_mode="median")
            gbps = nbytes / us / 1e3
            print(f"{act:13s} {key_name:20s} {str(cfg):70s} {us:8.1f} us {gbps:6.0f} GB/s "
                  f"{100 * gbps / ceiling:5.1f}% {'same bits' if same else 'DIFFERENT BITS'}", flush=True)


if __name__ == "__main__":
    main()
