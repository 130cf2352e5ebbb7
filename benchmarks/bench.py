"""Benchmarks (GPU): act+quant producers (triton_fp8 and torch backends), and (``decode.py``) the W8A8 GEMMs
and the Llama-3-8B MLP vs their peers.
``act_quant``: vs the eager and compiled chains, a bare Triton kernel and the copy ceiling, H = 14336, M in MS;
``gemm`` and ``mlp``: see ``benchmarks/decode.py``. Medians of ``triton.testing.do_bench``; bytes = inputs read once +
outputs written once. ``main`` (``fused-quant bench``) writes JSON (+ PNG) to --out, by default a fresh folder.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path

import torch

from fused_quant import keys as K
from fused_quant.flags import OUTPUT_FAILED

from benchmarks.timing import bench_graph_us, bench_us, copy_ceiling, loop_us, pyplot, save_figure, versions

# fused-quant bench's default output: a fresh folder per run, never the committed benchmarks/results
BENCH_OUT = Path(__file__).resolve().parent.parent / "bench-out"
H = 14336
MS = (1, 16, 256, 2048, 8192, 32768)
OPS = (  # (label, act, key name, input dtype)
    ("relu2 -> fp8 static", "relu2", "fp8_static_tensor", torch.bfloat16),
    ("silu_mul -> fp8 static", "silu_and_mul", "fp8_static_tensor", torch.bfloat16),
    ("silu_mul -> int8 per-token", "silu_and_mul", "int8_dynamic_token", torch.bfloat16),
    ("silu_mul -> fp8 per-token", "silu_and_mul", "fp8_dynamic_token", torch.bfloat16),
    ("relu2 -> int8 per-token", "relu2", "int8_dynamic_token", torch.bfloat16),
    ("relu2 -> fp8 per-token", "relu2", "fp8_dynamic_token", torch.bfloat16),
    ("relu2 -> int8 static", "relu2", "int8_static_tensor", torch.bfloat16),
    # fp16 input: FAST_SILU with two patched gates on sm_90 (act_quant._silu), the exact silu elsewhere
    ("fp16 silu_mul -> int8 per-token", "silu_and_mul", "int8_dynamic_token", torch.float16),
)


def _eager_chain(act: str, key: K.QuantKey):
    from fused_quant.reference import act_ref, quant_ref

    def chain(x, scale):
        return quant_ref(act_ref(act, x), key, scale)
    return chain


def bench_act_quant(quick: bool = False, ms=MS, h: int = H) -> dict:
    from fused_quant.ops import act_quant
    from fused_quant.registry import fused_act_quant

    from benchmarks.peers import bare_relu2_fp8_static

    import torch._dynamo

    import torch._inductor.config

    torch._dynamo.config.recompile_limit = 256  # one compiled chain per (op, M): never falls back to eager
    # compile in this process: no background compile workers competing with the launch-bound sizes
    torch._inductor.config.compile_threads = 1
    ceiling = copy_ceiling(quick)
    rows = []
    for label, act, key_name, dtype in OPS:
        key = K.KEYS[key_name]
        eager = _eager_chain(act, key)
        compiled = torch.compile(eager, dynamic=False)
        for m in ms:
            d_in = 2 * h if act == "silu_and_mul" else h
            x = torch.randn(m, d_in, device="cuda").to(dtype)
            scale = torch.tensor([0.05], device="cuda") if K.is_static(key) else None
            nbytes = x.numel() * 2 + m * h + (m * 4 if K.is_per_token(key) else 0)
            src = torch.empty(nbytes // 4, dtype=torch.int16, device="cuda")  # copy moves 2x its size
            dst = torch.empty_like(src)
            t = {
                "ours": bench_us(lambda: fused_act_quant(act, x, key, scale, backend="triton_fp8"), quick),
                "ours_op": bench_us(lambda: act_quant(x, act, key, scale, True, torch.float8_e4m3fn, "triton"),
                                  quick),
                "eager": bench_us(lambda: eager(x, scale), quick),
                "compiled": bench_us(lambda: compiled(x, scale), quick),
                "copy": bench_us(lambda: dst.copy_(src), quick),
            }
            # timed at every M: on CUDA tensors the torch backend's producers launch the same Triton kernels
            # as triton_fp8 (same bits), so this is that backend's call path here, never slow; torch math is "eager"
            t["torch_backend"] = bench_us(lambda: fused_act_quant(act, x, key, scale, backend="torch"), quick)
            if act == "relu2" and key_name == "fp8_static_tensor":
                t["bare_triton"] = bench_us(lambda: bare_relu2_fp8_static(x, scale), quick)
            if m <= 256:  # launch-bound sizes: the GPU time alone (CUDA graph replay) and the host-inclusive time
                ours_fn = lambda: fused_act_quant(act, x, key, scale, backend="triton_fp8")  # noqa: E731
                t["ours_graph"] = bench_graph_us(ours_fn)
                t["compiled_graph"] = bench_graph_us(lambda: compiled(x, scale))
                xb, sb = x[:, :h].contiguous(), torch.ones(1, device="cuda")  # a [M, H] relu2 -> fp8 launch
                loops = loop_us({"ours": ours_fn,
                                 "ours_op": lambda: act_quant(x, act, key, scale, True, torch.float8_e4m3fn, "triton"),
                                 "compiled": lambda: compiled(x, scale),
                                 "bare_triton": lambda: bare_relu2_fp8_static(xb, sb)},
                                target_ms=10 if quick else 40)
                t.update({f"{k}_loop": v for k, v in loops.items()})
                if "bare_triton" in t:
                    t["bare_triton_graph"] = bench_graph_us(lambda: bare_relu2_fp8_static(x, scale))
            timed = {k: v for k, v in t.items() if not k.endswith("_loop")}
            row = {"op": label, "M": m, "H": h, "bytes": nbytes, "us": t,
                   "GBps": {k: nbytes / (v * 1e-6) / 1e9 for k, v in timed.items()}}
            row["pct_ceiling"] = {k: 100 * v / ceiling for k, v in row["GBps"].items()}
            row.update(speedups(t))
            rows.append(row)
            print(f"{label:28s} M={m:6d} ours {t['ours']:8.1f}us op {t['ours_op']:8.1f}us "
                  f"compiled {t['compiled']:8.1f}us eager {t['eager']:8.1f}us "
                  f"torch backend {t['torch_backend']:8.1f}us "
                  f"{row['GBps']['ours']:7.0f} GB/s ({row['pct_ceiling']['ours']:5.1f}% of copy) "
                  f"x{row['speedup_vs']['compiled']:.2f} vs compiled", flush=True)
    return {"ceiling_GBps": ceiling, "versions": versions(), "rows": rows}


def speedups(t: dict[str, float]) -> dict[str, dict[str, float]]:
    """A producer row's ratios over ours, each in the same way ours was timed: ``speedup_vs`` a ``*_graph``
    replay's over ours replayed, the rest over do_bench's ours; ``loop_speedup_vs`` (where the row has loops) each
    loop's over ours in the loop. The bare Triton kernel's loop is a peer only where it runs the row's op (relu2
    -> FP8 static, where ``bare_triton`` is timed too); elsewhere it is a [M, H] launch's floor, not a ratio."""
    out = {"speedup_vs": {k: t[k] / t["ours_graph" if k.endswith("_graph") else "ours"] for k in t
                          if not k.endswith("_loop") and k not in ("ours", "ours_graph", "copy")}}
    if "ours_loop" in t:
        out["loop_speedup_vs"] = {k[:-5]: t[k] / t["ours_loop"] for k in t if k.endswith("_loop")
                                  and k != "ours_loop" and (k != "bare_triton_loop" or "bare_triton" in t)}
    return out


def plot_act_quant(result: dict, path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(OPS), figsize=(5 * len(OPS), 4), sharey=True)
    for ax, (label, *_) in zip(axes, OPS):
        rows = [r for r in result["rows"] if r["op"] == label]
        for peer in ("ours", "compiled", "eager", "torch_backend", "bare_triton"):
            timed = [r for r in rows if peer in r["GBps"]]
            if timed:
                ax.plot([r["M"] for r in timed], [r["GBps"][peer] for r in timed], marker="o",
                        label={"torch_backend": "torch backend"}.get(peer, peer))
        ax.axhline(result["ceiling_GBps"], color="k", ls="--", label="copy ceiling")
        ax.set_xscale("log", base=2)
        ax.set_title(label)
        ax.set_xlabel("M (tokens)")
    return save_figure(fig, axes[0], path, "GB/s", dpi=110)


def default_out() -> Path:
    """A fresh folder for one run: ``bench-out/<UTC timestamp>-<host>-<pid>`` in the checkout (ignored by git): runs
    started in one second, on the nodes of one shared checkout too, each have their own."""
    host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname()) or "host"
    return BENCH_OUT / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{host}-{os.getpid()}"


def out_problem(out: Path, force: bool) -> str:
    """Why ``out`` may not take a run's files ('' if it may): only a missing or empty folder, or with ``force``
    any folder, so that no run overwrites earlier results (the committed benchmarks/results among them); a path
    that cannot even be looked at (too long, in a folder this user may not read) says why."""
    try:  # os.stat's own errors: Path.exists() hides some of them, and which ones moves with Python's version
        is_dir = stat.S_ISDIR(os.stat(out).st_mode)
        if not is_dir:
            return f"--out {out} exists and is not a folder"
        if any(out.iterdir()) and not force:
            return (f"--out {out} is a folder that is not empty; pass --force to write into it (same names are "
                    "overwritten)")
    except (FileNotFoundError, NotADirectoryError):  # not there: made later, or refused by name where it cannot be
        return ""
    except OSError as exc:
        return f"--out {out} cannot be used: {exc.strerror or exc}"
    return ""


def save_json(result: dict, path: Path) -> bool:
    """Writes ``result`` to ``path``; where it cannot (a full disk, a folder of that name), one line on stderr and
    the JSON on stdout, so that a run's measurements outlive it. False then."""
    try:
        path.write_text(json.dumps(result, indent=1))
        return True
    except OSError as exc:
        print(f"bench: cannot write {path}: {exc.strerror or exc}; its JSON follows on stdout", file=sys.stderr)
        print(json.dumps(result, indent=1), flush=True)
        return False


def _act_quant_unavailable() -> str:
    """'' where ``bench act_quant`` can run here, else why not: it times the ``triton_fp8`` backend's producers
    (FP8 e4m3fn on NVIDIA SM90+) against their peers."""
    from fused_quant.platforms import probe
    from fused_quant.selection import BACKENDS

    ok, why = BACKENDS["triton_fp8"].is_available(probe(), explicit=True)
    return "" if ok else f"times the triton_fp8 backend's producers, which cannot run here: {why}"


def _shapes_line(model) -> str:
    return ", ".join(f"{label} {n}x{k}" for label, (n, k) in model.shapes.items()) + f"; MLP {model.d} x {model.h}"


def main(args) -> int:
    """``fused-quant bench``: ``args.which`` in act_quant / gemm / host / mlp / all, ``args.quick``, ``args.out`` (None: a
    fresh ``default_out()``), ``args.force``, ``args.m`` (None: each benchmark's own token counts), ``args.model`` /
    ``args.tp`` (``benchmarks.models``: another decoder's shapes, one GPU's share). Returns 2, with one line on stderr,
    when it cannot run, and 74 (``OUTPUT_FAILED``) when a JSON file could not be written (``save_json``)."""
    if args.m and args.which == "host":
        print("bench: --m names the token counts of act_quant, gemm and mlp; host times M = 1 only "
              "(python -m benchmarks.profile_host --m M profiles the same calls at M tokens)", file=sys.stderr)
        return 2
    from benchmarks import decode, models

    try:
        model = models.from_args(args)
    except (OSError, ValueError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if args.force and args.out is None:  # the default folder is always a fresh one: --force would say nothing
        print("bench: --force writes into an existing --out folder; name one with --out DIR", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out is not None else default_out()
    problem = out_problem(out, args.force) if args.out != "" else "--out is empty; name a folder"
    if problem:
        print(f"bench: {problem}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench: needs a GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from fused_quant.errors import BackendUnavailableError
    from fused_quant.selection import current_backend

    try:  # what "ours" runs on: a backend that cannot run here stops the run now, not at its first layer
        selected = current_backend()
    except BackendUnavailableError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    act_quant_why = _act_quant_unavailable()
    if act_quant_why and args.which == "act_quant":
        print(f"bench: act_quant {act_quant_why}", file=sys.stderr)
        return 2
    try:
        out.mkdir(parents=True, exist_ok=args.out is not None)  # the default folder is this run's alone
    except OSError as exc:
        print(f"bench: --out {out} cannot be made: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryFile(dir=out):  # a folder this user may not write to: said now, not after the run
            pass
    except OSError as exc:
        print(f"bench: --out {out} cannot be written to: {exc.strerror or exc}", file=sys.stderr)
        return 2
    shaped = {} if model == decode.LLAMA_3_8B else {"model": model}  # the benchmarks' own default otherwise
    print(f"bench: writing to {out}" + (f" ({model.name}: {_shapes_line(model)})" if shaped else ""), flush=True)
    print(f"bench: backend {selected.name} ({selected.reason})", flush=True)
    from fused_quant.gemm import disabled_gemms_warning

    for message in disabled_gemms_warning(selected.name).values():  # as probe and selftest warn
        print(f"bench: warning: {message}", flush=True)
    if args.which != "host" and pyplot() is None:
        print("bench: matplotlib is not installed: JSON and tables only, no PNG (pip install -e \".[bench]\")",
              flush=True)
    ms = {"ms": args.m} if args.m else {}
    failed = False  # a JSON file that could not be written (its results then went to stdout): exit 74
    if args.which == "all" and act_quant_why:
        print(f"bench: act_quant left out: {act_quant_why}", flush=True)
    if args.which in ("act_quant", "all") and not act_quant_why:
        res = bench_act_quant(args.quick, **ms, **({"h": model.h} if shaped else {}))
        failed |= not save_json(res, out / "act_quant.json")
        plot_act_quant(res, str(out / "act_quant.png"))
    runs = {}  # the decode runs' results, for the targets table printed last
    if args.which in ("gemm", "all"):
        res = runs["gemm"] = decode.bench_gemm(args.quick, **ms, **shaped)
        failed |= not save_json(res, out / "gemm.json")
        decode.plot_gemm(res, str(out / "gemm.png"))
    if args.which in ("host", "all"):
        res = runs["host"] = decode.bench_host(args.quick, **shaped)
        failed |= not save_json(res, out / "host.json")
    if args.which in ("mlp", "all"):
        res = runs["mlp"] = decode.bench_mlp(args.quick, **ms, **shaped)
        failed |= not save_json(res, out / "mlp.json")
        decode.plot_mlp(res, str(out / "mlp.png"))
    if runs:
        from benchmarks import report

        hosts = (runs["host"],) if "host" in runs else ()
        print("\ndecode targets (python -m benchmarks.report renders these files' tables):\n"
              + "\n".join(report.decode_targets(runs.get("gemm"), runs.get("mlp"), hosts)), flush=True)
    return OUTPUT_FAILED if failed else 0
