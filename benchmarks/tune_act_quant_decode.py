"""Producers at decode sizes (M = 1 / 16 / 64): GPU microseconds per call, replayed from a CUDA graph, of
the heuristic launch and of other per-token configs (each one's q checked bitwise against the heuristic's).

``python -m benchmarks.tune_act_quant_decode`` from the checkout root (a GPU): silu_and_mul over
H = 14336 and the identity over D = 4096 (Llama-3-8B's MLP inputs), per-token FP8 and int8, and the
static FP8 key's heuristic launch beside them.
"""

import argparse

import torch

from benchmarks.timing import graph_us, require_gpu
from fused_quant import keys as K
from fused_quant.kernels.launch import launch_act_quant

FP8 = torch.float8_e4m3fn
CHUNKS = [dict(variant="chunks", CHUNK=c, num_warps=w) for c in (2048, 1024) for w in (4, 8, 16, 32)]
ROWS = [dict(variant="rows", ROWS=1, BLOCK_N=4096, num_warps=w) for w in (4, 8, 16, 32)]


def run(act: str, key: str, m: int, d_in: int, cfgs: list) -> None:
    xs = [torch.randn(m, d_in, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
    scale = torch.tensor([0.05], device="cuda") if K.is_static(K.KEYS[key]) else None

    def call(x, cfg=None):
        return launch_act_quant(x, act, K.KEYS[key], scale, False, FP8, config=dict(cfg) if cfg else None)

    ref = [call(x) for x in xs]
    line = f"{act:13s} {key:18s} M={m:3d} heuristic {graph_us([lambda x=x: call(x) for x in xs]):6.2f}"
    for cfg in cfgs:
        outs = [call(x, cfg) for x in xs]
        same = all(torch.equal(a[0].view(torch.uint8), b[0].view(torch.uint8)) for a, b in zip(outs, ref))
        us = graph_us([lambda x=x: call(x, cfg) for x in xs])
        line += (f" | {','.join(f'{k}={v}' for k, v in cfg.items() if k != 'variant')} {us:6.2f}"
                 + ("" if same else " MISMATCH"))
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune_act_quant_decode", description=__doc__.split("\n\n")[0])
    ap.parse_args()
    require_gpu(ap, "tune_act_quant_decode")
    for m in (1, 16, 64):
        for key in ("fp8_dynamic_token", "int8_dynamic_token"):
            run("silu_and_mul", key, m, 2 * 14336, CHUNKS)
        run("silu_and_mul", "fp8_static_tensor", m, 2 * 14336, [])
        for key in ("fp8_dynamic_token", "int8_dynamic_token"):
            run("identity", key, m, 4096, ROWS)
        run("identity", "fp8_static_tensor", m, 4096, [])


if __name__ == "__main__":
    main()
