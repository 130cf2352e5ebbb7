"""Round 21, run 2: gate_up's GEMM alone, the GEMM then the silu_and_mul producer (two launches), and the GEMM
applying that producer in its epilogue (one launch), GPU us replayed from a CUDA graph over weight copies, at
each M bucket's config of the table; registers and spills of the compiled kernels; at M = 32 other configs of
the one-launch GEMM. Every one-launch output is checked against the two launches' bits."""

import json
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us  # noqa: E402
from fused_quant.gemm import GemmProblem  # noqa: E402
from fused_quant.kernels import gemm_launch as g, launch  # noqa: E402

D, H = 4096, 14336
MS = [int(m) for m in os.environ.get("MS", "1,4,8,16,32,64,128").split(",")]
FP8 = torch.float8_e4m3fn
dev = torch.device("cuda", 0)
arch = launch._cuda_arch(0)
torch.manual_seed(0)


def weights(kind, copies=2):
    out = []
    for _ in range(copies):
        w = torch.randn(2 * H, D, device=dev)
        w = (w * 30).clamp(-448, 448).to(FP8) if kind == "fp8" else (w * 40).clamp(-127, 127).to(torch.int8)
        out.append((w, torch.rand(2 * H, 1, device=dev) * 1e-3 + 1e-4))
    return out


def compiled_stats():
    stats = {}
    for key, ck in list(launch._COMPILED._data.items()):
        kw = dict(key[0][1:])
        if "ACT_Q" in kw:
            what = "/".join(str(kw.get(n)) for n in ("ACT_Q", "XQ", "BLOCK_N", "BLOCK_M", "BLOCK_K", "num_warps",
                                                     "num_stages", "INT8"))
            stats[what] = (getattr(ck, "n_regs", None), getattr(ck, "n_spills", None))
    return stats


rows = []
for kind in ("fp8", "int8"):
    key_name = "fp8_static_tensor" if kind == "fp8" else "int8_static_tensor"
    ws_list = weights(kind)
    for m in MS:
        x = torch.randn(m, D, device=dev)
        xq = (x * 8).clamp(-448, 448).to(FP8) if kind == "fp8" else (x * 20).round().clamp(-127, 127).to(torch.int8)
        xs = torch.full((1, 1), 0.02, device=dev)
        ys = torch.full((1,), 0.05 if kind == "fp8" else 0.3, device=dev)
        p = GemmProblem(m, 2 * H, D, kind, xq.dtype, torch.bfloat16, dev, False, True, False)
        table_cfg = g.small_m_config(arch, kind, 2 * H, D, m, ())[0]
        cfgs = [table_cfg]
        if m == 32:
            for bn in (64, 128, 256):
                for warps in (4, 8):
                    for bk in (128, 256):
                        c = dict(BLOCK_N=bn, BLOCK_M=32, BLOCK_K=bk, splits=1, num_warps=warps, num_stages=4)
                        if c != table_cfg:
                            cfgs.append(c)
        for cfg in cfgs:
            plain = [g.bind_small_m(p, w, s, None, cfg) for w, s in ws_list]
            h = plain[0](xq, xs)
            producer = launch.bind_rows(h, h, "silu_and_mul", key_name, True, FP8)
            one = [g.bind_small_m_producing(p, w, s, None, producer, config=cfg) for w, s in ws_list]
            try:
                q1 = one[0](xq, xs, ys)
            except Exception as exc:  # a config that does not compile (shared memory)
                rows.append({"kind": kind, "M": m, "cfg": cfg, "error": repr(exc)[:200]})
                print(kind, m, cfg, "error", repr(exc)[:120], flush=True)
                continue
            q2, _ = producer(h, ys)
            same = torch.equal(q1.view(torch.uint8), q2.view(torch.uint8))
            t = {}
            for turn in range(2):
                t.setdefault("gemm", []).append(graph_us([lambda c=c: c(xq, xs) for c in plain]))
                t.setdefault("two", []).append(graph_us([lambda c=c: producer(c(xq, xs), ys) for c in plain]))
                t.setdefault("one", []).append(graph_us([lambda c=c: c(xq, xs, ys) for c in one]))
            best = {k: min(v) for k, v in t.items()}
            row = {"kind": kind, "M": m, "cfg": cfg, "table": cfg is table_cfg, "bits": same, "us": t}
            rows.append(row)
            print(f"{kind} M={m:4d} {'table' if cfg is table_cfg else 'other'} {cfg['BLOCK_N']}x{cfg['BLOCK_M']}x"
                  f"{cfg['BLOCK_K']} w{cfg['num_warps']} s{cfg['num_stages']}: gemm {best['gemm']:6.2f} two "
                  f"{best['two']:6.2f} one {best['one']:6.2f} ({best['two'] - best['one']:+.2f}) bits {same}",
                  flush=True)
stats = compiled_stats()
for k, v in stats.items():
    print("compiled", v, k)
with open(os.path.join(os.environ.get("OUT", "."), "run2_producing_gemm.json"), "w") as f:
    json.dump({"rows": rows, "compiled": {k: list(v) for k, v in stats.items()}}, f, indent=1)
