"""Thirty-fifth round, run 2: few-token blocks on the CUDA cores at 2-8 tokens, against the installed rows.

The twenty-eighth round tried blocks of 2 / 4 tokens in one program with a three-dimensional accumulator, in tiles
of 8-64 weight rows and 4 warps (1.2-3.6x the installed rows' time), before its later runs found one or two weight
rows and one warp fastest at one token. This times that narrow region at 2, 4 and 8 tokens, and for int8 a second
form where each thread loads four K bytes as one 32-bit word and multiplies-adds them with one ``dp4a`` (four int8
products summed into int32: no byte conversions, a quarter of the multiply-adds), at 1-8 tokens.

A standalone kernel (the package's is untouched): out[m, n] = bf16(float(acc[n, m]) * xs[m] * ws[n]), the order of the
small-M kernel's epilogue, so the int8 forms give the installed row's bits. Per (kind, shape, M): every tile once,
then the fastest against the installed row (``bind_small_m`` with the table's row, as a captured call runs it) in
three turns, the order flipped each turn. GPU us per call, replayed from a CUDA graph cycling through weight copies
that exceed L2 (``graph_us``, as the sweep times). int8 outputs are compared with the installed row's bit for bit,
FP8 ones with float64 under the sweep's bound.

``python benchmarks/results/round35/run2_fewtoken.py [--ms 1,2,4,8] [--shapes ...] [--kinds ...]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

from benchmarks.decode import SHAPES, _weights, copies_for
from benchmarks.sweep_small_m_gemm import _activation, _error, error_bound
from benchmarks.timing import graph_us

PLAIN, DP4A = 0, 1


@triton.jit
def _dp4a(a, b, c):
    return tl.inline_asm_elementwise("dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r", [a, b, c], dtype=tl.int32,
                                     is_pure=True, pack=1)


@triton.jit
def few_kernel(x_ptr, w_ptr, xs_ptr, ws_ptr, out_ptr, M, N, K, stride_xm, stride_wn, stride_om,
               BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, INT8: tl.constexpr,
               MODE: tl.constexpr):
    rn = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    rn_safe = tl.where(rn < N, rn, 0)
    rm_safe = rm % M
    if MODE == 1:  # DP4A: four K bytes a 32-bit word
        rk = tl.arange(0, BLOCK_K // 4)
        wp = w_ptr.to(tl.pointer_type(tl.int32)) + rn_safe[:, None] * (stride_wn // 4) + rk[None, :]
        xp = x_ptr.to(tl.pointer_type(tl.int32)) + rm_safe[:, None] * (stride_xm // 4) + rk[None, :]
        acc = tl.zeros((BLOCK_N, BLOCK_M, BLOCK_K // 4), dtype=tl.int32)
        for _ in range(0, K, BLOCK_K):
            w = tl.broadcast_to(tl.load(wp)[:, None, :], (BLOCK_N, BLOCK_M, BLOCK_K // 4))
            x = tl.broadcast_to(tl.load(xp)[None, :, :], (BLOCK_N, BLOCK_M, BLOCK_K // 4))
            acc = _dp4a(w, x, acc)
            wp += BLOCK_K // 4
            xp += BLOCK_K // 4
    else:
        rk = tl.arange(0, BLOCK_K)
        wp = w_ptr + rn_safe[:, None] * stride_wn + rk[None, :]
        xp = x_ptr + rm_safe[:, None] * stride_xm + rk[None, :]
        if INT8:
            acc = tl.zeros((BLOCK_N, BLOCK_M, BLOCK_K), dtype=tl.int32)
        else:
            acc = tl.zeros((BLOCK_N, BLOCK_M, BLOCK_K), dtype=tl.float32)
        for _ in range(0, K, BLOCK_K):
            w = tl.load(wp)
            x = tl.load(xp)
            if INT8:
                acc += w.to(tl.int32)[:, None, :] * x.to(tl.int32)[None, :, :]
            else:
                acc += w.to(tl.float32)[:, None, :] * x.to(tl.float32)[None, :, :]
            wp += BLOCK_K
            xp += BLOCK_K
    s = tl.sum(acc, axis=2)  # [BLOCK_N, BLOCK_M]
    xs = tl.load(xs_ptr + rm, mask=rm < M, other=0.0)[None, :]
    ws = tl.load(ws_ptr + rn, mask=rn < N, other=0.0)[:, None]
    out = (s.to(tl.float32) * xs * ws).to(tl.bfloat16)
    tl.store(out_ptr + rm[None, :] * stride_om + rn[:, None], out, mask=(rn[:, None] < N) & (rm[None, :] < M))


def tiles(kind: str, m: int) -> list[dict]:
    """The tiles tried: 1-4 weight rows, K blocks of 256-2048, 1-2 warps, at most 64 accumulators a thread."""
    out = []
    for mode in ((PLAIN, DP4A) if kind == "int8" else (PLAIN,)):
        if mode == PLAIN and m == 1:
            continue  # the installed one-token rows are this form
        for bn in (1, 2, 4):
            for bk in (256, 512, 1024, 2048):
                for warps in (1, 2):
                    lanes = bn * m * (bk // 4 if mode == DP4A else bk) // (32 * warps)
                    if 4 <= lanes <= 64 and bk // (4 if mode == DP4A else 1) >= 32 * warps:
                        out.append(dict(BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, MODE=mode))
    return out


def few_call(cfg: dict, kind: str, m: int, n: int, k: int, w, ws, xq, xs):
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    grid = (triton.cdiv(n, cfg["BLOCK_N"]),)

    def call():
        few_kernel[grid](xq, w, xs, ws, out, m, n, k, xq.stride(0), w.stride(0), out.stride(0),
                         BLOCK_N=cfg["BLOCK_N"], BLOCK_M=m, BLOCK_K=cfg["BLOCK_K"], INT8=kind == "int8",
                         MODE=cfg["MODE"], num_warps=cfg["num_warps"], num_stages=1)
        return out

    return call


def label(cfg: dict) -> str:
    return f"{'dp4a' if cfg['MODE'] == DP4A else 'plain'} {cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default="int8,fp8")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--ms", default="1,2,4,8")
    args = ap.parse_args(argv)
    ms = [int(v) for v in args.ms.split(",")]
    summary = []
    t0 = time.time()
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        for kind in args.kinds.split(","):
            weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
            for m in ms:
                if kind == "fp8" and m == 1:
                    continue
                xq, xs, _ = _activation(kind, m, k)
                p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
                row, _ = g.small_m_config(g._device_arch(xq.device), kind, n, k, m, ())
                base = [g.bind_small_m(p, w, ws, None) for w, ws in weights]
                ref = base[0](xq, xs)
                trials = []
                for cfg in tiles(kind, m):
                    calls = [few_call(cfg, kind, m, n, k, w, ws, xq, xs) for w, ws in weights]
                    try:
                        got = calls[0]()
                    except Exception as exc:  # a tile the GPU cannot hold
                        print(f"  skip {label(cfg)}: {type(exc).__name__}: {str(exc)[-300:]}", flush=True)
                        continue
                    if kind == "int8" and not torch.equal(got.view(torch.int16), ref.view(torch.int16)):
                        raise RuntimeError(f"{kind} {shape} M={m} {label(cfg)}: not the installed row's bits")
                    if kind == "fp8":
                        w0, ws0 = weights[0]
                        err = _error(got.float(), xq, xs, w0, ws0)
                        # bf16 out: the float64 bound plus bf16's half ulp
                        if not err <= error_bound(kind, k) + 2.0**-8:
                            raise RuntimeError(f"{kind} {shape} M={m} {label(cfg)}: off by {err:.2e}")
                    us = graph_us(calls)
                    trials.append((us, cfg))
                    print(f"{kind:4s} {shape:7s} M={m} {label(cfg):20s} {us:7.2f} us", flush=True)
                best_us, best = min(trials, key=lambda t: t[0])
                turns = {"installed": [], "few": []}
                fns = {"installed": [lambda c=c: c(xq, xs) for c in base],
                       "few": [few_call(best, kind, m, n, k, w, ws, xq, xs) for w, ws in weights]}
                for turn in range(3):
                    for name in (("installed", "few") if turn % 2 == 0 else ("few", "installed")):
                        turns[name].append(graph_us(fns[name]))
                a, b = statistics.median(turns["installed"]), statistics.median(turns["few"])
                cfg_s = "x".join(str(row[f]) for f in ("BLOCK_N", "BLOCK_M", "BLOCK_K")) + \
                    f" s{row['splits']} w{row['num_warps']}" if row else "-"
                summary.append(f"{kind:4s} {shape:7s} M={m}  installed {a:6.2f} us ({cfg_s})  few {b:6.2f} us "
                               f"({label(best)})  x{a / b:.2f}  {n * k / (b * 1e-6) / 1e12:.2f} TB/s")
            del weights
            torch.cuda.empty_cache()
    print(f"\n{time.time() - t0:.0f} s; {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
