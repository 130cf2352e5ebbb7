"""Round 17: the MLP's output SQNR against bf16 (benchmarks.decode.mlp_sqnr) with the table before this round
and after it: the fp32 product's different summation changes bits at M >= 64, not the accuracy."""
import sys
from pathlib import Path
import torch
import fused_quant
from fused_quant.kernels import gemm_launch as g
from benchmarks.decode import mlp_sqnr

MS = (1, 16, 64, 128, 256)
res = {}
for name, path in (("old", Path(sys.argv[1])), ("new", g.SMALL_M_CONFIG_FILE)):
    g.SMALL_M_CONFIG_FILE = path
    fused_quant.reset()
    res[name] = mlp_sqnr(MS)
print(torch.cuda.get_device_name(), torch.__version__)
print("M | key | SQNR dB old table | new table | new - old")
for m in MS:
    for key in res["old"][m]:
        a, b = res["old"][m][key], res["new"][m][key]
        print(f"{m:4d} | {key:10s} | {a:8.3f} | {b:8.3f} | {b - a:+.3f}", flush=True)
