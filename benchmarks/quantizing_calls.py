"""Time the small-M GEMM's per-token quantizing calls, config by config, against the producer then the GEMM.

An eager ``QuantLinear`` given a float input at 1-16 tokens lets the small-M GEMM quantize it (one launch fewer for
the host). For a per-token key each program first sweeps its tokens' rows for their absmax, GPU time the config
table never saw: it was swept for quantized inputs (``sweep_small_m_gemm``). For Llama-3-8B's linears, int8 and FP8
per-token keys and M in 1, 2, 4, 8, 16, this times (GPU us per call, replayed from a CUDA graph cycling through
weight copies that exceed L2, as the config sweep times):

- ``producer + GEMM``: the identity producer, then the table's row as a plain call (what a captured call runs);
- the quantizing call in each candidate config (``candidates``): the table's rows at every bucket up to 16 whose
  token block takes M tokens (``gemm_launch.quantizes_float_input``), and for int8 at one token one-token rows of
  4-64 weight rows a program (the table's has 1-2: every program sweeps the row, thousands of programs);

each call's output against the producer's then the plain GEMM's in the same config, and for int8 in the table's
row too, bit for bit (a difference stops the run; FP8 adds its fp32 sums in another order in another split count,
so only the same config promises the same bits). The row ``gemm_launch.quantizing_config`` binds is marked ``*``.
Writes ``quantizing_calls.json``, ``.txt`` and ``.png`` to ``--out``; with ``--install`` also the int8 rows' fastest
quantizing configs, ``small_m_quantizing_configs.json`` (what ``quantizing_config`` reads: int8's integer sums give
every config the same bits), merged into the package's as the sweep installs its table. GPU only; ``candidates``
runs anywhere.

``python -m benchmarks.quantizing_calls --out DIR [--kinds int8,fp8] [--shapes gate_up,...] [--ms 1,16] [--install
[--own-rows]]``: ``--own-rows`` installs the rows as this GPU model's own, beside the arch's (as the sweep's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

from benchmarks import models
from benchmarks.decode import SHAPES, _weights, copies_for, table_arch
from benchmarks.sweep_small_m_gemm import install, writes_over_installed
from benchmarks.timing import (Log, graph_us, out_folder, progress, pyplot, require_gpu, rows_so_far, save_figure,
                               token_counts, versions)

MS = (1, 2, 4, 8, 16)
# int8 one-token rows with more weight rows a program than the table's (BLOCK_N, BLOCK_K, num_warps): fewer programs
# sweep the row; each keeps BLOCK_N x BLOCK_K lane sums, 64 a thread
ONE_TOKEN_WIDER = ((4, 2048, 4), (8, 1024, 4), (16, 512, 4), (32, 256, 4), (64, 128, 4))
BASELINE = "producer + GEMM"


def candidates(arch: str | None, kind: str, n: int, k: int, m: int,
               model: str | None = None) -> list[tuple[str, dict]]:
    """(label, config) of the quantizing calls timed for a problem, without repeats: the table's rows (GPU ``model``'s
    own where it has them) at each bucket up to 16 that quantize ``m`` float tokens, then (int8 at one token)
    ``ONE_TOKEN_WIDER``."""
    out: list[tuple[str, dict]] = []
    for bucket in (b for b in g.M_BUCKETS if b <= 16):
        cfg, _ = g.small_m_config(arch, kind, n, k, bucket, (), model)
        if cfg is not None and g.quantizes_float_input(cfg, m, kind) and cfg not in [c for _, c in out]:
            out.append((f"table's {bucket}-token row", cfg))
    if kind == "int8" and m == 1:
        for bn, bk, warps in ONE_TOKEN_WIDER:
            cfg = dict(BLOCK_N=bn, BLOCK_M=1, BLOCK_K=bk, splits=1, num_warps=warps, num_stages=1)
            if cfg not in [c for _, c in out]:
                out.append((f"one-token row of {bn}", cfg))
    return out


def _label(cfg: dict) -> str:
    return "x".join(str(cfg[f]) for f in ("BLOCK_N", "BLOCK_M", "BLOCK_K")) + \
        f" s{cfg['splits']} w{cfg['num_warps']} st{cfg['num_stages']}"


def run(kinds, shapes: dict, ms, log, saved=lambda rows: None) -> list[dict]:
    """One row per (kind, shape, M, variant): its GPU us per call and the baseline's; ``saved(rows)`` after each
    (kind, shape, M), so that a run stopped part-way keeps what it timed."""
    from fused_quant import keys as K
    from fused_quant.kernels import launch
    from fused_quant.registry import platform_fp8_dtype

    arch = table_arch(torch.cuda.current_device())
    fp8 = platform_fp8_dtype()  # e4m3fnuz on gfx94x
    model = launch.device_name(torch.cuda.current_device())  # the rows this GPU model takes (its own, else the arch's)
    rows = []
    done, total, start = 0, len(shapes) * len(kinds) * len(ms), time.perf_counter()
    for label, (n, k) in shapes.items():
        for kind in kinds:
            key_name = f"{kind}_dynamic_token"
            key = K.key_from_name(key_name)
            weights = _weights(kind, n, k, copies_for(n * k), fp8)
            for m in ms:
                done += 1
                table, _ = g.small_m_config(arch, kind, n, k, m, (), model)
                if table is None:  # a torch provider is faster there: no quantizing call is bound
                    log(f"{kind:4s} {label:7s} M={m:3d}: no small-M row, nothing to time")
                    continue
                torch.manual_seed(m)
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) * 3
                p = GemmProblem(m, n, k, kind, weights[0][0].dtype, torch.bfloat16, x.device, True, True, False)
                plain = [g.bind_small_m(p, w, ws, None, table) for w, ws in weights]

                def two(c, x=x):
                    q, s = launch.launch_act_quant(x, "identity", key, None, False, fp8)
                    return c(q, s.reshape(-1, 1))

                in_table = two(plain[0])  # int8: what every config gives (exact integer sums)
                base = graph_us([lambda c=c: two(c) for c in plain])
                picked = g.quantizing_config(p, table, arch) if g.quantizes_float_input(table, m, kind) else None
                rows.append(dict(kind=kind, shape=label, n=n, k=k, m=m, variant=BASELINE, config=table, us=round(base, 2),
                                 baseline_us=round(base, 2), picked=False))
                log(f"{kind:4s} {label:7s} M={m:3d} {BASELINE:26s} {base:7.2f} us  {_label(table)}  "
                    + progress(done, total, start))
                for name, cfg in candidates(arch, kind, n, k, m, model):
                    calls = [g.bind_small_m_quantizing(p, w, ws, None, (key_name, x.dtype), cfg) for w, ws in weights]
                    if not calls[0].fits(x.dtype):
                        log(f"  {name}: over a block's shared memory, not timed")
                        continue
                    got, want = calls[0](x, None), two(g.bind_small_m(p, *weights[0], None, cfg))
                    if not torch.equal(got, want) or (kind == "int8" and not torch.equal(got, in_table)):
                        raise RuntimeError(f"{kind} {label} M={m}: {name} {cfg} quantizing differs from the producer "
                                           f"then the GEMM in {'that config' if not torch.equal(got, want) else table}")
                    us = graph_us([lambda c=c: c(x, None) for c in calls])
                    mark = cfg == picked
                    rows.append(dict(kind=kind, shape=label, n=n, k=k, m=m, variant=name, config=cfg, us=round(us, 2),
                                     baseline_us=round(base, 2), picked=mark))
                    log(f"{kind:4s} {label:7s} M={m:3d} {name:26s} {us:7.2f} us  x{base / us:.2f} of the baseline"
                        f"  {_label(cfg)}{'  *' if mark else ''}")
                saved(rows)
            del weights
            torch.cuda.empty_cache()
    return rows


def plot(rows: list[dict], path: Path) -> bool:
    """GPU us per call against M for each (kind, shape): the baseline, the bound pick and the fastest variant."""
    plt = pyplot()
    panels = sorted({(r["kind"], r["shape"]) for r in rows})
    if plt is None or not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (kind, shape) in zip(axes[0], panels):
        sel = [r for r in rows if (r["kind"], r["shape"]) == (kind, shape)]
        ms = sorted({r["m"] for r in sel})
        lines = {BASELINE: [], "bound (*)": [], "fastest quantizing": []}
        for m in ms:
            at = [r for r in sel if r["m"] == m]
            lines[BASELINE].append(at[0]["baseline_us"])
            picked = [r["us"] for r in at if r["picked"]]
            lines["bound (*)"].append(picked[0] if picked else float("nan"))
            quantizing = [r["us"] for r in at if r["variant"] != BASELINE]
            lines["fastest quantizing"].append(min(quantizing) if quantizing else float("nan"))
        for (name, ys), style in zip(lines.items(), ("k-o", "C0-s", "C1--^")):
            ax.plot(ms, ys, style, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens")
        ax.set_title(f"{kind} per-token, {shape}", fontsize=10)
    return save_figure(fig, axes[0][0], path, ylabel="GPU us per call")


def fastest(rows: list[dict], arch: str, meta: dict, model: str | None = None) -> dict:
    """``--install``'s table (the sweep's format): for each int8 (shape, M) measured, the quantizing config timed
    fastest, with its time, the producer then the GEMM's and the table row's own quantizing call's (None where that
    did not fit a block's shared memory); with ``model`` (``--own-rows``) as that GPU model's own rows (a row's
    ``device``), which serve that model only, beside the arch's."""
    out = []
    for base in (r for r in rows if r["kind"] == "int8" and r["variant"] == BASELINE):
        at = (base["kind"], base["n"], base["k"], base["m"])
        timed = [r for r in rows if (r["kind"], r["n"], r["k"], r["m"]) == at and r["variant"] != BASELINE]
        if not timed:
            continue
        best = min(timed, key=lambda r: r["us"])
        own = [r["us"] for r in timed if r["config"] == base["config"]]
        out.append(dict(arch=arch, kind="int8", shape=base["shape"], n=base["n"], k=base["k"], m=base["m"],
                        **{f: best["config"][f] for f in g.CONFIG_FIELDS}, us=best["us"], baseline_us=base["us"],
                        row_us=own[0] if own else None, variant=best["variant"], **({"device": model} if model else {})))
    return {"meta": meta, "rows": out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.quantizing_calls", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for quantizing_calls.json, .txt and .png")
    ap.add_argument("--kinds", default="int8,fp8")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--install", action="store_true",
                    help="also merge the int8 rows' fastest configs into the package's "
                         "fused_quant/kernels/small_m_quantizing_configs.json")
    ap.add_argument("--own-rows", action="store_true",
                    help="with --install: the rows as this GPU model's own, installed beside the arch's (they serve "
                         "this model only; another model of the arch keeps the arch's)")
    a, decoder = models.parse(ap, argv)
    try:
        shapes = decoder.pick(a.shapes.split(","))
    except ValueError as exc:
        ap.error(str(exc))
    ms = token_counts(ap, "--ms", a.ms, MS)  # the table's buckets: a row at another count is never read
    kinds = a.kinds.split(",")
    if not set(kinds) <= {"int8", "fp8"}:
        ap.error(f"--kinds takes int8 and fp8, separated by commas; got {a.kinds!r}")
    if a.own_rows and not a.install:
        ap.error("--own-rows goes with --install")
    if a.install and "int8" not in kinds:
        ap.error("--install merges the int8 rows' configs: --kinds must name int8")
    over = writes_over_installed(Path(a.out), g.SMALL_M_QUANTIZING_FILE) if a.install else ""
    if over:
        ap.exit(2, f"quantizing_calls: {over}\n")
    require_gpu(ap, "quantizing_calls")
    out = out_folder(ap, a.out, "quantizing_calls")
    partial = out / "quantizing_calls.partial.json"  # the rows timed so far, until the run's JSON replaces it
    with Log(out / "quantizing_calls.txt") as log:
        rows = run(kinds, shapes, ms, log, rows_so_far(partial))
    with open(out / "quantizing_calls.json", "w") as f:
        json.dump({"versions": versions(), "rows": rows}, f, indent=1)
    partial.unlink(missing_ok=True)
    plot(rows, out / "quantizing_calls.png")
    if a.install:
        from fused_quant.kernels import launch

        meta = {**versions(), "script": "benchmarks/quantizing_calls.py"}
        index = torch.cuda.current_device()
        table = fastest(rows, table_arch(index), meta, launch.device_name(index) if a.own_rows else None)
        path = out / g.SMALL_M_QUANTIZING_FILE.name
        path.write_text(json.dumps(table, indent=1) + "\n")
        install(path, g.SMALL_M_QUANTIZING_FILE, timed=False)
        print(f"installed {len(table['rows'])} rows into {g.SMALL_M_QUANTIZING_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
