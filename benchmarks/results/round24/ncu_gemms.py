"""Twenty-fourth round: Nsight Compute counters of the small-M GEMM (the sweep table's config for each of
Llama-3-8B's four linears, FP8 and int8, M = 1 and 16, the two-kernel plan the MLP's graph replays) and of a
device copy moving each weight's bytes. Run under
``ncu --profile-from-start off``: only the launches between profiler start and stop are profiled, one per
case, in the order this script prints (``order`` in the JSON it writes to argv[1])."""
import json
import sys

import torch

from benchmarks.decode import SHAPES
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g
from fused_quant.registry import platform_fp8_dtype

dev = torch.device("cuda", torch.cuda.current_device())
fp8 = platform_fp8_dtype()
cases, order = [], []
torch.manual_seed(0)
for label, (n, k) in SHAPES.items():
    for kind in ("fp8", "int8"):
        wdtype = fp8 if kind == "fp8" else torch.int8
        w = (torch.randint(-127, 128, (n, k), dtype=torch.int8, device=dev) if kind == "int8"
             else (torch.randn(n, k, device=dev) * 4).to(fp8))
        ws = torch.rand(n, 1, device=dev) * 0.01 + 1e-3
        for m in (1, 16):
            xq = (torch.randint(-127, 128, (m, k), dtype=torch.int8, device=dev) if kind == "int8"
                  else (torch.randn(m, k, device=dev) * 4).to(fp8))
            xs = torch.rand(m, 1, device=dev) * 0.01 + 1e-3
            p = GemmProblem(m, n, k, kind, wdtype, torch.bfloat16, dev, True, True, False)
            cfg, why = g.small_m_config(g._device_arch(dev), kind, n, k, m, ())
            if cfg is None:
                print(f"{kind} {label} M={m}: no small-M config ({why}), not profiled")
                continue
            c = g._small_m_call(p)
            call = g._small_m_caller(p, c, w, ws, None, bound=False)  # the main kernel, then the epilogue kernel
            call(xq, xs)
            cases.append((call, xq, xs))
            name = f"{kind} {label} M={m}"
            order.append({"case": name, "kernel": "small_m_gemm", "weight_bytes": n * k, "config": cfg,
                          "splits": c.splits})
            if c.reduce is not None:
                order.append({"case": name, "kernel": "split_k_epilogue", "weight_bytes": n * k})
    src = torch.empty(n * k // 4, dtype=torch.int16, device=dev)  # copy_ reads and writes n * k / 2 bytes each
    dst = torch.empty_like(src)
    dst.copy_(src)
    cases.append((lambda d=dst, s=src: d.copy_(s), None, None))
    order.append({"case": f"copy of {label}'s weight bytes", "kernel": "copy", "weight_bytes": n * k})
torch.cuda.synchronize()
torch.cuda.profiler.start()
for fn, xq, xs in cases:
    fn(xq, xs) if xq is not None else fn()
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
for i, o in enumerate(order):
    print(i, o)
json.dump({"order": order, "torch": torch.__version__, "triton": __import__("triton").__version__}, open(sys.argv[1], "w"),
          indent=1)
