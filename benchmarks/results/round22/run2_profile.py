"""Round 22, run 2: where the MLP's GPU time goes under graph replay. Each path (two calls / linear_act_quant)
of each key is captured as one CUDA graph of CALLS MLP calls and one replay is profiled (CUPTI kernel records):
per kernel of a call, its mean duration and the mean gap from the previous kernel's end (negative: the kernels
overlap, programmatic dependent launch), and the GPU time per call."""

import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.getcwd())
import fused_quant as fq  # noqa: E402
from fused_quant import keys as K  # noqa: E402

D, H, CALLS = 4096, 14336, 8
MS = [int(m) for m in os.environ.get("MS", "1,16,128").split(",")]
KEYS = {"fp8_static": fq.kFp8StaticTensorSym, "fp8_token": fq.kFp8DynamicTokenSym,
        "int8_token": fq.kInt8DynamicTokenSym}
torch.manual_seed(0)
act = fq.SiluAndMul()
layers = {}
for name, key in KEYS.items():
    gu = torch.nn.Linear(D, 2 * H, bias=False, device="cuda", dtype=torch.bfloat16)
    dn = torch.nn.Linear(H, D, bias=False, device="cuda", dtype=torch.bfloat16)
    s = 0.05 if K.is_static(key) else None
    layers[name] = (fq.QuantLinear.from_float(gu, key, s, name="gate_up"), fq.QuantLinear.from_float(dn, key, s, name="down"))
    del gu, dn


def two(qgu, qd, x):
    return qd(fq.maybe_fused_act_quant(act, qgu(x), qd))


def one(qgu, qd, x):
    return qd(fq.linear_act_quant(qgu, x, act, qd))


def short(name):
    for k in ("small_m_gemm", "split_absmax", "token_split", "token_chunks", "token_kernel", "static_kernel",
              "static_flat", "split_k_epilogue", "token_2pass", "persistent"):
        if k in name:
            return k
    return name[:24]


def profiled(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                 and e.time_range.end > e.time_range.start), key=lambda e: e.time_range.start)
    ev = [e for e in ev if "Memcpy" not in e.name and "Memset" not in e.name]
    per = len(ev) // CALLS
    if per * CALLS != len(ev):
        return f"{len(ev)} kernel records for {CALLS} calls: " + ", ".join(short(e.name) for e in ev[:12])
    rows = []
    for j in range(per):
        durs = [ev[c * per + j].time_range.elapsed_us() for c in range(1, CALLS)]
        gaps = [ev[c * per + j].time_range.start - ev[c * per + j - 1].time_range.end for c in range(1, CALLS)]
        rows.append(f"{short(ev[j].name)} {statistics.mean(durs):.2f} (gap {statistics.mean(gaps):+.2f})")
    total = (ev[-1].time_range.end - ev[per].time_range.start) / (CALLS - 1)
    del graph
    return f"{total:6.2f} us/call: " + " | ".join(rows)


with torch.no_grad():
    for m in MS:
        x = torch.randn(m, D, device="cuda", dtype=torch.bfloat16)
        for name, (qgu, qd) in layers.items():
            for label, f in (("two", two), ("one", one)):
                for _ in range(3):
                    f(qgu, qd, x)
                print(f"M={m:4d} {name:10s} {label}: {profiled(lambda: f(qgu, qd, x))}", flush=True)
