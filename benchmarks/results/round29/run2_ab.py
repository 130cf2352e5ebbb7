"""Twenty-ninth round, run 2: a one-token block's FP8 lanes summed exactly in fp64 (``small_m_gemm._lanes_sum``, this
tree) against the fp32 ``tl.sum`` it replaced (the same kernel source with that one line back), at M = 1 on the table's
FP8 one-token rows of all four shapes, in turns (5 turns, order flipped each turn). GPU us per call replayed from a
CUDA graph over weight copies (the sweep's timing); each against float64 (the sweep's bound), and whether the two
give the same bits."""
import dataclasses
import importlib.util
import json
import pathlib
import statistics
import sys
import time

import torch

from benchmarks.decode import SHAPES, _weights, copies_for
from benchmarks.sweep_small_m_gemm import _activation, _error, error_bound
from benchmarks.timing import graph_us
from fused_quant import runtime
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels.triton import small_m_gemm as new_module

start = time.time()
src = pathlib.Path(new_module.__file__).read_text()
NEW, OLD = "acc = _lanes_sum(acc, INT8)", "acc = tl.sum(acc, axis=1)[:, None]"
assert src.count(NEW) == 1
old_file = pathlib.Path("/tmp/ab_old/small_m_gemm_fp32_lanes.py")
old_file.parent.mkdir(exist_ok=True)
old_file.write_text(src.replace(NEW, OLD))
spec = importlib.util.spec_from_file_location("small_m_gemm_fp32_lanes", old_file)
old_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old_module)
rows = {(r["kind"], r["shape"], r["m"]): r for r in json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"]}
out = []


def bound_calls(kernel, p, weights, cfg):
    """Each weight copy's bound call with ``kernel`` as the small-M kernel (fresh plans: the runtime reset first)."""
    runtime.reset()
    saved = new_module.small_m_gemm_kernel
    new_module.small_m_gemm_kernel = kernel
    try:
        return [g.bind_small_m(p, w_, ws_, None, cfg) for w_, ws_ in weights]
    finally:
        new_module.small_m_gemm_kernel = saved


for shape in ("qkv", "o", "down", "gate_up"):
    kind = "fp8"
    n, k = SHAPES[shape]
    row = rows[(kind, shape, 1)]
    cfg = {f: row[f] for f in g.CONFIG_FIELDS}
    weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
    xq, xs, _ = _activation(kind, 1, k)
    p = GemmProblem(1, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    p32 = dataclasses.replace(p, out_dtype=torch.float32)
    calls = {"fp64 lanes": bound_calls(new_module.small_m_gemm_kernel, p, weights, cfg),
             "fp32 lanes": bound_calls(old_module.small_m_gemm_kernel, p, weights, cfg)}
    f32 = {"fp64 lanes": bound_calls(new_module.small_m_gemm_kernel, p32, weights[:1], cfg)[0],
           "fp32 lanes": bound_calls(old_module.small_m_gemm_kernel, p32, weights[:1], cfg)[0]}
    w, ws = weights[0]
    times = {name: [] for name in calls}
    for turn in range(5):
        for name in (list(calls) if turn % 2 == 0 else list(calls)[::-1]):
            times[name].append(graph_us([lambda c=c: c(xq, xs) for c in calls[name]]))
    same = bool(torch.equal(calls["fp64 lanes"][0](xq, xs), calls["fp32 lanes"][0](xq, xs)))
    base = statistics.median(times["fp32 lanes"])
    for name in calls:
        err = _error(f32[name](xq, xs), xq, xs, w, ws)
        med = statistics.median(times[name])
        faster = sum(a < b for a, b in zip(times[name], times["fp32 lanes"]))
        out.append(dict(kind=kind, shape=shape, m=1, which=name, cfg=cfg, us=times[name], err=err,
                        within_bound=err <= error_bound(kind, k), bits_equal=same, faster_turns=faster,
                        weight_TBps=n * k / med / 1e6))
        print(f"{kind} {shape:7s} M=1 {cfg['BLOCK_N']}x{cfg['BLOCK_K']} {name}: median {med:6.2f} min "
              f"{min(times[name]):6.2f} us ({med - base:+.2f}; faster in {faster}/5) {n * k / med / 1e6:.3f} TB/s "
              f"err {err:.1e} ok {err <= error_bound(kind, k)} bf16 bits equal: {same}", flush=True)
    del weights, calls
    torch.cuda.empty_cache()
    json.dump(out, open(sys.argv[1], "w"), indent=1)
print(f"done in {time.time() - start:.0f} s", flush=True)
