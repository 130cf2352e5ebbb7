"""Eager MLP per-token keys at M = 1, 2, 4, 8, 16: the small-M GEMM quantizing x (on) vs the producer then
the GEMM (off), in turns on one machine; also the static key (unchanged) and bf16 as the drift check."""
import json, sys
import torch
import fused_quant
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g
from benchmarks import decode
from benchmarks.timing import loop_us

peers = {"bf16": decode._mlp(None, 4096, 14336, 1)[0]}
for name, key in decode.MLP_KEYS.items():
    peers[name] = decode._mlp(key, 4096, 14336, 1)[0]
res = {}
for turn in range(2):
    for variant, max_m in (("off", 0), ("on", 16)):
        g.QUANTIZING_TOKEN_MAX_M = max_m
        fused_quant.reset()
        for m in (1, 4, 8, 16):
            x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
            r = loop_us({n: (lambda f=f: f(x)) for n, f in peers.items()}, target_ms=15, rounds=3)
            res.setdefault(m, {}).setdefault(variant, []).append(r)
json.dump(res, open(sys.argv[1], "w"), indent=1)
print("== eager MLP us, off -> on per turn (bf16 | fp8_static | fp8_token | int8_token)")
for m, v in res.items():
    print(f"M={m:2d} " + " ; ".join(
        "/".join(f"{v['off'][t][k]:.1f}>{v['on'][t][k]:.1f}" if k.endswith("token") else f"{v['off'][t][k]:.1f}"
                 for k in ("bf16", "fp8_static", "fp8_token", "int8_token")) for t in range(2)))
