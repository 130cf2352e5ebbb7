"""Twenty-third round, run 1: the driver launch (driver_launch.DriverLaunch) against Triton's launcher.
Host us per call of bench host's calls (M = 1, Llama-3-8B MLP shapes), the two taking turns (three pairs,
Triton's launcher first in each), the bits of each key's MLP and of each call's output compared between
the two, and which kernels the driver launch laid out or declined."""
import json
import sys

import torch

import fused_quant
from benchmarks.decode import host_calls
from benchmarks.timing import host_us
from fused_quant.kernels import direct_launch as dl
from fused_quant.kernels import driver_launch

built, declined = [], []
_of = driver_launch.of


def counting_of(compiled, grid):
    r = _of(compiled, grid)
    name = getattr(getattr(compiled, "src", None), "fn", None)
    name = getattr(name, "__name__", str(name))
    (built if r is not None else declined).append(name)
    if r is None:
        meta = compiled.metadata
        print("declined", name, grid, {k: getattr(meta, k, None) for k in ("num_ctas", "launch_cooperative_grid",
              "global_scratch_size", "profile_scratch_size", "launch_pdl")},
              list(compiled.src.signature.values()), driver_launch.ptx_params(compiled.asm["ptx"]), flush=True)
    return r


driver_launch.of = counting_of


def outputs(calls):
    out = {}
    for name, fns in calls.items():
        for cname, fn in fns.items():
            r = fn()
            r = r.data if hasattr(r, "data") and not isinstance(r, torch.Tensor) else r
            out[(name, cname)] = r.clone() if isinstance(r, torch.Tensor) else None
    torch.cuda.synchronize()
    return out


rows = {}
bits = {}
for pair in range(3):
    for flag in (False, True):
        dl.DRIVER_LAUNCH = flag
        fused_quant.reset()
        calls, layers = host_calls()
        ref = outputs(calls)
        t = {f"{n} | {c}": host_us(fn, 1000) for n, fns in calls.items() for c, fn in fns.items()}
        rows.setdefault(flag, []).append(t)
        bits[flag] = ref
        print(f"pair {pair} driver={flag}: " + "  ".join(f"{k} {v:.1f}" for k, v in t.items()), flush=True)

same = {f"{k[0]} | {k[1]}": bool(torch.equal(bits[False][k].view(torch.uint8), bits[True][k].view(torch.uint8)))
        for k in bits[False] if bits[False][k] is not None}
print("bits equal:", all(same.values()), [k for k, v in same.items() if not v], flush=True)
print("driver launches built:", sorted(set(built)), "declined:", sorted(set(declined)), flush=True)

# primitives: one small-M GEMM launch, Triton's launcher vs the driver's, same operands
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

dev = torch.device("cuda", torch.cuda.current_device())
m, n, k = 1, 28672, 4096
xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device=dev)
w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device=dev)
xs, ws = torch.rand(m, 1, device=dev), torch.rand(n, 1, device=dev)
p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, dev, True, True, False)
dl.DRIVER_LAUNCH = True
fused_quant.reset()
bound = g.bind_small_m(p, w, ws, None)
for _ in range(3):
    bound(xq, xs)
main = g._small_m_call(p).main
out1 = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
out2 = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
args = lambda out: (*(t.data_ptr() for t in (xq, w, xs, ws, ws, out, out, ws, ws)), *g.gemm_scalars(p, w), *main.plan.consts)
prims = {}
drv = main.direct
print("main.direct is a DriverLaunch:", isinstance(drv, driver_launch.DriverLaunch), flush=True)
if isinstance(drv, driver_launch.DriverLaunch):
    a1, a2 = args(out1), args(out2)
    stream = torch.cuda.current_stream().cuda_stream
    prims["driver launch (addresses)"] = host_us(lambda: drv(stream, a1))
    # Triton's launcher for the same kernel: compile key lookup through KernelCall with the flag off
    dl.DRIVER_LAUNCH = False
    fused_quant.reset()
    bound = g.bind_small_m(p, w, ws, None)
    for _ in range(3):
        bound(xq, xs)
    main2 = g._small_m_call(p).main
    prims["Triton launcher (addresses)"] = host_us(lambda: main2.direct(stream, a2))
    drv(stream, a1)
    main2.direct(stream, a2)
    torch.cuda.synchronize()
    print("primitive bits equal:", torch.equal(out1.view(torch.uint8), out2.view(torch.uint8)), flush=True)
prims["bound call (Triton launcher)"] = host_us(lambda: bound(xq, xs))
print("primitives:", {k: round(v, 2) for k, v in prims.items()}, flush=True)

med = lambda v: sorted(v)[len(v) // 2]
table = {key: (med([r[key] for r in rows[False]]), med([r[key] for r in rows[True]])) for key in rows[False][0]}
json.dump({"pairs": {str(f): r for f, r in rows.items()}, "medians": table, "bits_equal": same,
           "built": sorted(set(built)), "declined": sorted(set(declined)), "primitives": prims,
           "versions": {"torch": torch.__version__, "triton": __import__("triton").__version__}},
          open(sys.argv[1], "w"), indent=1)
print("\nhost us per call, M = 1, median of 3: Triton launcher -> driver launch")
for key, (a, b) in table.items():
    print(f"{key:55s} {a:7.1f} -> {b:7.1f}  ({b - a:+.1f})")
