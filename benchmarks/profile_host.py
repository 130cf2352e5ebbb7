"""Where a decode call's host time goes (GPU, Llama-3-8B MLP shapes, M = 1 unless ``--m`` names another
token count): cProfile of back-to-back calls (``decode.host_calls``: those ``fused-quant bench host`` times at
M = 1), the functions with the most own time first, and the host cost of the primitives a call is made of
(allocations, a view, a module call, one direct launch of the small-M GEMM given tensors or addresses).

Usage: python -m benchmarks.profile_host [--top N] [--calls N] [--m M]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats

import torch

from fused_quant.flags import whole_number

from benchmarks.decode import host_calls
from benchmarks.timing import host_us, require_gpu


def profile(fn, calls: int, top: int) -> str:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for i in range(calls):
        fn()
        if i % 100 == 99:
            torch.cuda.synchronize()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def launch_primitives() -> dict:
    """One direct launch of the small-M GEMM (int8 gate_up, M = 1) given its operands' addresses (what
    the bound calls pass), the launch alone and, where it is the driver launch,
    Triton's launcher for the same kernel."""
    from fused_quant.gemm import GemmProblem
    from fused_quant.kernels import direct_launch as dl
    from fused_quant.kernels import gemm_launch as g
    from fused_quant.kernels import launch
    from fused_quant.kernels.driver_launch import DriverLaunch

    dev = torch.device("cuda", torch.cuda.current_device())
    m, n, k = 1, 28672, 4096
    xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device=dev)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device=dev)
    xs, ws = torch.rand(m, 1, device=dev), torch.rand(n, 1, device=dev)
    out = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
    p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, dev, True, True, False)
    bound = g.bind_small_m(p, w, ws, None)
    for _ in range(3):  # compiles, then files the kernel for the direct launch
        bound(xq, xs)
    torch.cuda.synchronize()
    call = g._small_m_call(p)
    main = call.main
    if main.direct is None or call.reduce is not None:  # one kernel only: its partials would be ``out``
        return {}
    index, consts = dev.index, main.plan.consts
    # the kernel's nine pointers as a bound one-kernel call passes them (bias none: the weight scale stands in)
    tensors = (xq, w, xs, ws, ws, out, out, ws, ws, *g.gemm_scalars(p, w))
    addresses = tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in tensors)
    stream = torch.cuda.current_stream().cuda_stream
    launches = {"direct launch given addresses": lambda: dl.run(main.direct, index, (*addresses, *consts)),
                "the direct launch alone (addresses)": lambda: main.direct(stream, (*addresses, *consts))}
    if isinstance(main.direct, DriverLaunch):  # Triton's launcher for the same kernel, for comparison
        compiled = next(c for c in launch._COMPILED._data.values() if c.function == main.direct._function)
        before, dl.DRIVER_LAUNCH = dl.DRIVER_LAUNCH, False
        try:
            triton_launch = dl.direct_of(compiled, main.plan.grid, index)
        finally:
            dl.DRIVER_LAUNCH = before
        launches["Triton's launcher alone (addresses)"] = lambda: triton_launch(stream, (*addresses, *consts))
    return {"small-M GEMM bound call (int8 gate_up)": lambda: bound(xq, xs), **launches}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile_host", description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=functools.partial(whole_number, what="a count of rows"), default=18)
    ap.add_argument("--calls", type=functools.partial(whole_number, what="a count of calls"), default=1000)
    ap.add_argument("--m", type=functools.partial(whole_number, what="a token count"), default=1,
                    help="tokens per call (the eager MLP's host work moves with M)")
    args = ap.parse_args()
    require_gpu(ap, "profile_host")
    t = torch.empty(1, device="cuda")
    dev = t.device
    prims = {"torch.empty": lambda: torch.empty((1, 28672), dtype=torch.bfloat16, device=dev),
             "torch.empty_strided": lambda: torch.empty_strided((1, 28672), (28672, 1), dtype=torch.bfloat16,
                                                                device=dev),
             "nn.Module call (identity)": lambda m=torch.nn.Identity(): m(t), "t.view(-1)": lambda: t.view(-1),
             "t.data_ptr()": lambda: t.data_ptr()}
    prims.update(launch_primitives())
    for name, fn in prims.items():
        print(f"primitive {name}: {host_us(fn):.2f} us/call", flush=True)
    calls, _ = host_calls(m=args.m)
    for name, fns in calls.items():
        for cname, fn in fns.items():
            print(f"=== M={args.m} {name} {cname}: {host_us(fn):.2f} us/call", flush=True)
            print(profile(fn, args.calls, args.top), flush=True)


if __name__ == "__main__":
    main()
