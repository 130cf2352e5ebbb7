"""Twenty-fourth round (the twenty-third round's run 2 again, at the final commit; `driver_launch.of` takes the
device index since 9409ffb): the driver launch against Triton's launcher in one process, taking turns
(run 1's pairs of whole processes moved by +-5-20 us from turn to turn on a slow host).
1. One small-M GEMM launch (int8 gate_up, M = 1) through each, 20 turns of 500 calls;
   the ctypes floor (cuCtxGetCurrent) and the launch without the PDL attribute.
2. bench host's calls with every direct launch switched between the two (``direct_launch.run`` swapped
   per turn; the Triton turn pays one dict lookup more), 10 turns of 300 calls each."""
import ctypes
import json
import statistics
import sys

import torch

import fused_quant
from benchmarks.decode import host_calls
from benchmarks.timing import host_us
from fused_quant.kernels import direct_launch as dl
from fused_quant.kernels import driver_launch as dv

triton_of = {}
_of = dv.of


def pairing_of(compiled, grid, index):
    r = _of(compiled, grid, index)
    if r is not None:
        launcher, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
        g0, g1, g2 = grid
        triton_of[id(r)] = (lambda stream, args: launcher(g0, g1, g2, stream, function, metadata, None, None, None,
                                                          *args))
        triton_of[id(r), "keep"] = r
    return r


dv.of = pairing_of
driver_run = dl.run


def triton_run(direct, index, args):
    triton_of[id(direct)](dl.raw_stream(index), args)


fused_quant.reset()
out = {}
# 1. primitives
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

dev = torch.device("cuda", torch.cuda.current_device())
m, n, k = 1, 28672, 4096
xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device=dev)
w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device=dev)
xs, ws = torch.rand(m, 1, device=dev), torch.rand(n, 1, device=dev)
p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, dev, True, True, False)
bound = g.bind_small_m(p, w, ws, None)
for _ in range(3):
    bound(xq, xs)
main = g._small_m_call(p).main
drv = main.direct
tri = triton_of[id(drv)]
o = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
args = (*(t.data_ptr() for t in (xq, w, xs, ws, ws, o, o, ws, ws)), *g.gemm_scalars(p, w), *main.plan.consts)
stream = torch.cuda.current_stream().cuda_stream
lib = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()
get = lib.cuCtxGetCurrent
prims = {"driver launch": [], "Triton launcher": [], "bound call": [], "ctypes cuCtxGetCurrent": [],
         "torch.empty_strided": []}
for turn in range(20):
    prims["Triton launcher"].append(host_us(lambda: tri(stream, args), 500))
    prims["driver launch"].append(host_us(lambda: drv(stream, args), 500))
    prims["bound call"].append(host_us(lambda: bound(xq, xs), 500))
    prims["ctypes cuCtxGetCurrent"].append(host_us(lambda: get(ctypes.byref(ctx)), 500))
    prims["torch.empty_strided"].append(host_us(lambda: torch.empty_strided((1, n), (n, 1), dtype=torch.bfloat16,
                                                                           device=dev), 500))
out["primitives"] = prims
print("primitives, median (min) over 20 turns of 500 calls, us:")
for name, v in prims.items():
    print(f"  {name:28s} {statistics.median(v):6.2f} ({min(v):.2f})", flush=True)

# 2. bench host's calls, both launches taking turns
calls, layers = host_calls()
rows = {}
for turn in range(10):
    for name, run in (("triton", triton_run), ("driver", driver_run)):
        dl.run = run
        for cname, fns in calls.items():
            for c, fn in fns.items():
                if c.startswith("checked"):
                    continue
                rows.setdefault(f"{cname} | {c}", {}).setdefault(name, []).append(host_us(fn, 300))
dl.run = driver_run
out["calls"] = rows
print("\nhost us per call at M = 1, median (min) over 10 turns of 300 calls: Triton launcher -> driver launch")
for key, v in rows.items():
    a, b = statistics.median(v["triton"]), statistics.median(v["driver"])
    print(f"  {key:45s} {a:6.1f} ({min(v['triton']):5.1f}) -> {b:6.1f} ({min(v['driver']):5.1f})  {b - a:+.1f}",
          flush=True)
out["versions"] = {"torch": torch.__version__, "triton": __import__("triton").__version__}
json.dump(out, open(sys.argv[1], "w"), indent=1)
