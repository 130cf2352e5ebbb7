"""Where the Llama-3-8B MLP's GPU time goes under CUDA-graph replay (GPU): for each key and token count, each
kernel of one MLP call with its share of the critical path, i.e. its end minus the previous kernel's end. With
programmatic dependent launch the kernels overlap, so their durations alone say little; the shares add up to the
call's GPU time.

One CUDA graph of ``--calls`` MLP calls (``decode._mlp``'s, bf16 and the three keys) is captured per key and
token count after a warm-up, replayed, and one replay is profiled (torch.profiler's CUDA kernel records). The
first call of the graph has no previous kernel of its own, so the means are over calls 2 to N. Prints a table,
writes ``trace.json`` and, with matplotlib, ``trace.png`` (a stacked bar per key and token count) into ``--out``.

Usage: python -m benchmarks.trace_mlp [--m 1,16,64] [--calls 8] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from fused_quant.flags import whole_number, whole_numbers

from benchmarks import models
from benchmarks.timing import out_folder, require_gpu

# kernel-name fragments -> the label a row shows, first match wins (the package's Triton kernels, cuBLAS's and
# torch's kernels of the bf16 MLP as named on the H100 in round 30; any other keeps a prefix of its own name)
LABELS = (("small_m_gemm", "small-M GEMM"), ("split_k_epilogue", "split-K epilogue"),
          ("split_absmax", "per-token absmax"), ("token_split", "per-token quantize (split rows)"),
          ("token_chunks", "per-token quantize (chunks)"), ("token_2pass", "per-token quantize (2 sweeps)"),
          ("token_persistent", "per-token quantize (persistent)"), ("token_kernel", "per-token quantize"),
          ("static_flat", "static quantize"), ("static_kernel", "static quantize"),
          ("int8_gemm_tma", "int8 GEMM (descriptors)"), ("int8_gemm", "int8 GEMM"),
          ("epilogue", "epilogue"), ("nvjet", "cuBLAS GEMM"), ("gemm", "cuBLAS GEMM"), ("gemv", "cuBLAS GEMV"),
          ("splitkreduce", "cuBLAS split-K reduce"), ("silu_kernel", "torch silu"), ("mulfunctor", "torch mul"))


def label(kernel: str) -> str:
    """The short name a kernel's row shows (``LABELS``), else the first 32 characters of its own name."""
    low = kernel.lower()
    return next((short for fragment, short in LABELS if fragment in low), kernel[:32])


def critical_path(records: list[tuple[str, float, float]], calls: int) -> dict:
    """``records``: (kernel name, start us, end us) of one replay of ``calls`` identical calls, in start order.
    Returns ``{"us_per_call", "kernels": [{"kernel", "label", "share_us", "duration_us"}]}``: per kernel of a
    call, the means over calls 2..N of its end minus the previous kernel's end and of its duration; the call's
    GPU time from the end of call 1 to the end of call N, per call. Raises ValueError where the records do not
    split into ``calls`` calls of the same kernels."""
    if calls < 2:
        raise ValueError(f"critical_path needs at least 2 calls (the first has no previous kernel), got {calls}")
    per, rest = divmod(len(records), calls)
    names = [r[0] for r in records]
    if per == 0 or rest or any(names[c * per:(c + 1) * per] != names[:per] for c in range(calls)):
        raise ValueError(f"{len(records)} kernel records do not split into {calls} calls of the same kernels: "
                         + ", ".join(label(n) for n in names[:2 * max(per, 1)]))
    kernels = []
    for j in range(per):
        shares, durations = [], []
        for c in range(1, calls):
            name, start, end = records[c * per + j]
            shares.append(end - records[c * per + j - 1][2])
            durations.append(end - start)
        kernels.append({"kernel": names[j], "label": label(names[j]), "share_us": statistics.mean(shares),
                        "duration_us": statistics.mean(durations)})
    return {"us_per_call": (records[-1][2] - records[per - 1][2]) / (calls - 1), "kernels": kernels}


def kernel_records(fn, calls: int) -> list[tuple[str, float, float]]:
    """(name, start us, end us) of every kernel of one replay of a CUDA graph of ``calls`` calls of ``fn``
    (``timing.captured``: compiles and first-call binding stay out of the capture), after two more replays."""
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.timing import captured

    graph = captured([fn], calls)
    for _ in range(2):
        graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
              and e.time_range.end > e.time_range.start and "Memcpy" not in e.name and "Memset" not in e.name]
    del graph
    return sorted(((e.name, float(e.time_range.start), float(e.time_range.end)) for e in events),
                  key=lambda r: r[1])


def trace(ms, calls: int, model=None) -> dict:
    from benchmarks.decode import LLAMA_3_8B, MLP_KEYS, _mlp
    from benchmarks.timing import versions

    model = model or LLAMA_3_8B
    d, h = model.d, model.h
    torch.manual_seed(0)
    peers = {"bf16": _mlp(None, d, h, 1)[0], **{name: _mlp(key, d, h, 1)[0] for name, key in MLP_KEYS.items()}}
    rows = []
    with torch.no_grad():
        for m in ms:
            x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
            for name, mlp in peers.items():
                try:
                    row = critical_path(kernel_records(lambda mlp=mlp: mlp(x), calls), calls)
                except ValueError as exc:  # a graph whose calls differ: say so, keep the others
                    row = {"error": str(exc)}
                rows.append({"M": m, "peer": name, **row})
                print(render_row(rows[-1]), flush=True)
    return {"versions": versions(), "model": model.name, "calls": calls, "D": d, "H": h, "rows": rows}


def render_row(row: dict) -> str:
    head = f"M={row['M']:5d} {row['peer']:10s}"
    if "error" in row:
        return f"{head} {row['error']}"
    parts = " | ".join(f"{k['label']} {k['share_us']:.2f} ({k['duration_us']:.2f})" for k in row["kernels"])
    return f"{head} {row['us_per_call']:7.2f} us/call: {parts}"


def plot(result: dict, path: str) -> bool:
    """A stacked horizontal bar per (M, peer): each kernel's share of the critical path, in us."""
    from benchmarks.timing import pyplot

    plt = pyplot()
    rows = [r for r in result["rows"] if "kernels" in r]
    if plt is None or not rows:
        return False
    labels = list(dict.fromkeys(k["label"] for r in rows for k in r["kernels"]))
    colors = dict(zip(labels, plt.cm.tab20.colors * (1 + len(labels) // 20)))
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.5))
    for y, row in enumerate(rows):
        left = 0.0
        for k in row["kernels"]:
            share = max(k["share_us"], 0.0)
            ax.barh(y, share, left=left, color=colors[k["label"]], edgecolor="white", linewidth=0.5)
            left += share
    ax.set_yticks(range(len(rows)), [f"M={r['M']} {r['peer']}" for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("GPU us per MLP call (each kernel's share of the critical path, graph replay)")
    for name in labels:
        ax.barh(0, 0, color=colors[name], label=name)
    ax.set_title(f"{result.get('model', 'Llama-3-8B')} MLP under CUDA-graph replay, "
                 f"{result['versions'].get('device', '')}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, not over them
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.trace_mlp", description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=lambda text: whole_numbers(text, "token counts"), default=(1, 16, 64),
                    help="token counts, comma-separated (default: 1,16,64)")
    ap.add_argument("--calls", type=whole_number, default=8, help="MLP calls per captured graph (default: 8, at least 2)")
    ap.add_argument("--out", required=True, help="folder for trace.json and trace.png")
    args, model = models.parse(ap, argv)
    ms = list(args.m)
    if args.calls < 2:
        ap.error(f"--calls needs at least 2 (the first call has no previous kernel), got {args.calls}")
    require_gpu(ap, "trace_mlp")
    out = out_folder(ap, args.out, "trace_mlp")
    result = trace(ms, args.calls, model)
    (out / "trace.json").write_text(json.dumps(result, indent=1) + "\n")
    drawn = plot(result, str(out / "trace.png"))
    print(f"trace_mlp: {out / 'trace.json'}" + (f", {out / 'trace.png'}" if drawn else " (no matplotlib: no plot)"))


if __name__ == "__main__":
    main()
