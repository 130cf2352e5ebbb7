"""Round 22, run 7: every candidate config of the small-M sweep timed for FP8 o and qkv at M = 8 and 16
(per-token activation scales, per-channel weight scales, bf16 out, graph replay over weight copies, as the sweep
times them), sorted, with the installed table's row marked: why FP8 o took 9.1-9.2 us at M = 16 against 7.5 at 8."""

import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.decode import _weights, copies_for  # noqa: E402
from benchmarks.sweep_small_m_gemm import SHAPES, _activation, configs  # noqa: E402
from benchmarks.timing import graph_us  # noqa: E402
from fused_quant.gemm import GemmProblem  # noqa: E402
from fused_quant.kernels import gemm_launch as g  # noqa: E402

for label in ("o", "qkv"):
    n, k = SHAPES[label]
    weights = _weights("fp8", n, k, copies_for(n * k), torch.float8_e4m3fn)
    for m in (8, 16):
        xq, xs, _ = _activation("fp8", m, k)
        p = GemmProblem(m, n, k, "fp8", xq.dtype, torch.bfloat16, xq.device, True, True, False)
        row, _ = g.small_m_config("sm_90", "fp8", n, k, m, ())
        trials = []
        for cfg in configs(m, k):
            calls = [g.bind_small_m(p, w, ws, None, cfg) for w, ws in weights]
            calls[0](xq, xs)
            trials.append((graph_us([lambda c=c: c(xq, xs) for c in calls]), cfg))
        trials.sort(key=lambda t: t[0])
        print(f"fp8 {label} M={m}: table row {row}", flush=True)
        for us, cfg in trials[:8]:
            mark = " <- table" if all(row.get(key) == v for key, v in cfg.items()) else ""
            print(f"  {us:6.2f} us  {cfg}{mark}", flush=True)
        print("  table row's time: " + ", ".join(f"{us:.2f}" for us, cfg in trials
                                                if all(row.get(key) == v for key, v in cfg.items())), flush=True)
    del weights
    torch.cuda.empty_cache()
