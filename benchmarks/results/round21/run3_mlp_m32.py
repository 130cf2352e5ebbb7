"""Round 21, run 3: why the MLP with gate_up's one-launch GEMM (``linear_act_quant``) took 4.5 us more under
graph replay at M = 32 (runs 1-2) where that GEMM alone took 0.5 us less than the GEMM and the producer: the MLP
replayed at M = 16 / 32 / 64, two calls and one launch in turns, in the process's PDL setting (run twice, with
FUSED_QUANT_PDL on and off), then a torch.profiler trace of 20 replays of each at M = 32: kernel names and GPU
times."""

import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us  # noqa: E402
import fused_quant as fq  # noqa: E402

D, H = 4096, 14336
pdl = os.environ.get("FUSED_QUANT_PDL", "on")
torch.manual_seed(0)
act = fq.SiluAndMul()
key = fq.kInt8StaticTensorSym if os.environ.get("KIND") == "int8" else fq.kFp8StaticTensorSym
copies = []
for _ in range(2):
    gu = torch.nn.Linear(D, 2 * H, bias=False, device="cuda", dtype=torch.bfloat16)
    dn = torch.nn.Linear(H, D, bias=False, device="cuda", dtype=torch.bfloat16)
    copies.append((fq.QuantLinear.from_float(gu, key, 0.05, name="gate_up"),
                   fq.QuantLinear.from_float(dn, key, 0.05, name="down")))
    del gu, dn


def two(qgu, qd, x):
    return qd(fq.maybe_fused_act_quant(act, qgu(x), qd))


def one(qgu, qd, x):
    return qd(fq.linear_act_quant(qgu, x, act, qd))


with torch.no_grad():
    for m in (16, 32, 64):
        x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
        t = {"two": [], "one": []}
        for turn in range(3):
            for name, f in (("two", two), ("one", one)):
                t[name].append(graph_us([lambda c=c, f=f: f(*c, x) for c in copies], calls=8))
        print(f"PDL {pdl} {fq.key_from_name and key.dtype} M={m}: two {min(t['two']):.2f} one {min(t['one']):.2f} "
              f"(turns {['%.1f' % v for v in t['two']]} / {['%.1f' % v for v in t['one']]})", flush=True)
    m = 32
    x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
    for name, f in (("two", two), ("one", one)):
        for _ in range(3):
            f(*copies[0], x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            f(*copies[0], x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                graph.replay()
            torch.cuda.synchronize()
        print(f"PDL {pdl} M=32 {name}:")
        for evt in prof.key_averages():
            if evt.device_type == torch.autograd.DeviceType.CUDA and evt.count >= 20:
                print(f"   {evt.key[:90]:90s} n={evt.count:3d} avg {evt.device_time:.2f} us")
