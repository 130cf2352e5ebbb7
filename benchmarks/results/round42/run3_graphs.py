"""Forty-second round, run 3: is a slow int8 replay a property of the captured graph? Run 2 (an H100) timed the int8
per-token MLP at 1024 tokens at 314.8 / 334.0 / 368.6 us in three captures from the same state (a reset), FP8
per-token at 312-321 in every capture, and profiled one slow capture: both int8 GEMMs 7% longer (205.2 / 96.5
against 191.5 / 90.1 us).

Many graphs per arm, each captured after ``fused_quant.reset()`` (new bindings, new buffers) and all kept alive, then
each graph timed in four rounds (seven replays of its eight calls, median; the graphs' order rotated per round). A
graph slow in every round is slow by something captured in it (its buffers' addresses, its launches); a graph slow in
one round only, by the moment. Arms: int8 as installed; int8 with its int8 GEMM launched without programmatic
dependent launch (the other kernels as installed); int8 with PDL off everywhere (``FUSED_QUANT_PDL=off``); FP8
per-token. The int8 GEMMs' operand addresses are logged at capture (``KernelCall`` calls under capture).

Usage: python run3_graphs.py OUT.json
"""

import json
import os
import statistics
import sys

import torch

import fused_quant
from benchmarks import decode
from benchmarks.timing import captured, versions
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels import launch
from fused_quant.runtime import capturing

M, CALLS = 1024, 8
GRAPHS = {"int8": 8, "int8, GEMM without PDL": 8, "int8, PDL off": 8, "fp8_token": 4}
INSTALLED_CALL = g._triton_int8_call
LOG: list = []
_call = g.KernelCall.__call__


def logged_call(self, tensors, scalars, ptrs=None):
    if capturing() and str(getattr(self.plan, "variant", "")).startswith("int8_gemm"):
        addrs = []
        for t in tensors:
            t = getattr(t, "base", t)
            addrs.append(t.data_ptr() if isinstance(t, torch.Tensor) else None)
        LOG.append({"variant": self.plan.variant, "mnk": list(scalars[:3]), "addrs": addrs})
    return _call(self, tensors, scalars, ptrs)


def gemm_without_pdl(p, tma=False):
    saved = launch.pdl_options
    launch.pdl_options = lambda index, launch_first=False: {"PDL": False}
    try:
        return INSTALLED_CALL(p, tma)
    finally:
        launch.pdl_options = saved


def use(arm: str) -> None:
    g._triton_int8_call = gemm_without_pdl if arm == "int8, GEMM without PDL" else INSTALLED_CALL
    if arm == "int8, PDL off":
        os.environ["FUSED_QUANT_PDL"] = "off"
    else:
        os.environ.pop("FUSED_QUANT_PDL", None)
    fused_quant.reset()


def replay_us(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(7):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / CALLS)
    return statistics.median(times)


def main():
    g.KernelCall.__call__ = logged_call
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    fp8 = decode._mlp(K.kFp8DynamicTokenSym, d, h, 2)
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    x = torch.randn(M, d, device="cuda", dtype=torch.bfloat16)
    graphs, meta, ref = [], [], None
    for arm, count in GRAPHS.items():
        fns = fp8 if arm == "fp8_token" else int8
        for i in range(count):
            use(arm)
            out = fns[0](x)
            if arm != "fp8_token":
                ref = out.view(torch.int16) if ref is None else ref
                if not torch.equal(out.view(torch.int16), ref):
                    raise SystemExit(f"{arm} graph {i}: other bits than the first int8 graph's")
            LOG.clear()
            graphs.append(captured([lambda f=f: f(x) for f in fns], CALLS))
            meta.append({"arm": arm, "graph": i, "launches": list(LOG)})
    use("int8")
    g.KernelCall.__call__ = _call
    n = len(graphs)
    times = [[] for _ in range(n)]
    for rnd in range(4):
        order = list(range(n))[rnd * n // 4:] + list(range(n))[:rnd * n // 4]
        for j in (order if rnd % 2 == 0 else order[::-1]):
            times[j].append(replay_us(graphs[j]))
    for j in range(n):
        meta[j]["us"] = times[j]
    json.dump({"versions": versions(), "M": M, "calls": CALLS, "graphs": meta}, open(sys.argv[1], "w"), indent=1)
    print(versions())
    print("per graph: arm, graph, us per MLP in the four rounds, median; int8 GEMM operand addresses mod 2 MiB (x, out)")
    for j in range(n):
        m = meta[j]
        addrs = "; ".join(",".join(f"{a % (2 << 20):06x}" if a is not None else "-" for a in (l["addrs"][0],
                                                                                             l["addrs"][-1]))
                          for l in m["launches"][:2])
        print(f"{m['arm']:24s} {m['graph']} " + " ".join(f"{t:6.1f}" for t in m["us"])
              + f"  med {statistics.median(m['us']):6.1f}  {addrs}")
    print("\nper arm: median over graphs of each graph's median; spread between graphs; mean spread within a graph")
    for arm in GRAPHS:
        sel = [m["us"] for m in meta if m["arm"] == arm]
        meds = [statistics.median(t) for t in sel]
        within = statistics.mean(max(t) - min(t) for t in sel)
        print(f"{arm:24s} {statistics.median(meds):7.1f} us  between graphs {min(meds):6.1f}-{max(meds):6.1f}  "
              f"within {within:5.1f}")


if __name__ == "__main__":
    main()
