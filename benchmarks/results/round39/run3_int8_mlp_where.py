"""Thirty-ninth round, run 3: why run 2's ``bench mlp`` read the int8 per-token MLP at 1024 / 4096 tokens 24% slower
than run 2's A/B of the same rows. The bench's own sequence (its MLPs, the SQNR pass, eager loops, then graph
replays) at the given token counts, then which Triton int8 GEMM launches the process made (through descriptors or
pointers, per problem), then the A/B's sequence (a fresh reset, one eager call, graph replays) on the same MLPs."""

import sys

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import graph_us
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

MS = [int(v) for v in sys.argv[1].split(",")]


def launches() -> list:
    return sorted((key[1].m, key[1].n, key[1].k, "descriptors" if key[2] else "pointers")
                  for key in g._GEMM_LAUNCHES._data if key[0] == "triton_int8")


def main():
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    result = decode.bench_mlp(ms=MS, keys={"int8_token": K.kInt8DynamicTokenSym})
    print("bench_mlp:", [(r["M"], round(r["graph_us"]["int8_token"], 1), round(r["graph_us"]["bf16"], 1))
                         for r in result["rows"]], flush=True)
    print("launches after bench_mlp:", launches(), flush=True)
    torch.manual_seed(0)
    bf16 = decode._mlp(None, d, h, 2)
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    for m in MS:
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        fused_quant.reset()
        int8[0](x)
        t = [graph_us([lambda f=f: f(x) for f in int8], calls=4 if m >= 4096 else 8) for _ in range(3)]
        b = [graph_us([lambda f=f: f(x) for f in bf16], calls=4 if m >= 4096 else 8) for _ in range(3)]
        print(f"A/B sequence M={m}: int8 {min(t):.1f} us, bf16 {min(b):.1f} us; launches {launches()}", flush=True)


if __name__ == "__main__":
    main()
