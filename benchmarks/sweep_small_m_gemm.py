"""Sweep the small-M W8A8 GEMM's launch configs on this GPU and write the table its provider reads.

For Llama-3-8B's four linears, FP8 and int8, and every M bucket of ``gemm_launch.M_BUCKETS``: each
candidate tile config (x split-K counts) and the torch providers the chain would otherwise pick
(``torch._scaled_mm`` in each of ``gemm_launch.SCALED_MM_WAYS``; ``torch._int_mm`` + epilogue and the
Triton scaled int8 GEMM): GPU time per call replayed from a CUDA graph cycling through copies of the
weight that exceed L2 (``decode.graph_us``), so that every call streams its weight from HBM.
The fastest config per (kind, N, K, M) is checked against float64 (``error_bound``; a config outside it
stops the sweep) and written with its time, its error and every torch time; the provider's
predicate takes a problem only where ours measured faster (``gemm_launch.small_m_config``), and
``torch._scaled_mm`` takes the faster of its row-wise ways (``gemm_launch.scaled_mm_way``).
``--retime`` searches nothing: it times each installed row's config again beside the torch providers
(after a change to those), so that the row's times still come from one run; a (kind, shape, M) the
installed table lacks is left out, or with ``--seed-from B`` timed with the installed config of token
count B (a new bucket, measured before a search of its own).

Every config timed is a line of ``DIR/sweep_small_m_gemm.log``, and ``DIR/small_m_gemm_sweep.png`` draws them per
shape and token count beside the pick and the fastest torch provider (how close the choices lie);
``--replot LOG TABLE --out DIR`` draws it again from a saved log and table (no GPU). A run stopped part-way keeps
the rows it timed (saved after each); ``--resume`` with the same ``--out`` times only the rest, and a new sweep into
a folder holding one is refused, as is ``--out`` the package's own folder.

``python -m benchmarks.sweep_small_m_gemm --out DIR`` (GPU), then merge ``DIR/small_m_gemm_configs.json`` into
``fused_quant/kernels/`` (``--install`` does that, row by row: a sweep split over several calls with ``--kinds`` /
``--shapes`` / ``--ms`` installs part by part). The rows are the arch's, which every GPU of the arch takes unless
its model has rows of its own; ``--own-rows`` writes them as this GPU model's own, installed beside the arch's (a
node of another model of the arch, in a cluster sharing one install, keeps the arch's). On the H200, 17 of qkv's 18
rows (both kinds) took 158 s (benchmarks/RESULTS.md, thirteenth round; 9 buckets then, 11 now, and 256-token blocks
tried at 160 / 192): the four shapes take well over four times that.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

from fused_quant.flags import whole_number
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

from benchmarks import models
from benchmarks.decode import SHAPES, copies_for, _weights, table_arch
from benchmarks.timing import Log, graph_us, made_folder, progress, pyplot, save_figure, token_counts, versions

# (BLOCK_N, BLOCK_K, num_warps, num_stages): BLOCK_N weight rows on the MMA's wide side
TILES_NARROW = ((32, 256, 4, 4), (32, 512, 4, 3), (64, 128, 4, 6), (64, 256, 4, 4), (64, 256, 4, 6),
                (64, 512, 4, 3), (64, 512, 4, 4), (128, 128, 4, 5), (128, 256, 4, 4), (128, 256, 8, 4),
                (256, 128, 8, 4))
TILES_WIDE = ((64, 128, 4, 4), (64, 256, 4, 3), (128, 128, 4, 4), (128, 128, 8, 3), (64, 64, 4, 8), (64, 128, 4, 6),
              (64, 128, 4, 8), (64, 256, 4, 4), (64, 256, 4, 5), (64, 512, 4, 2), (64, 512, 4, 3), (128, 64, 4, 6),
              (128, 256, 8, 3))
# one-token blocks (BLOCK_M = 1, the products on the CUDA cores; one token only: at 2-4 tokens both one-token blocks
# side by side and one program over blocks of 2 / 4 tokens took 1.2-3.6x as long as the installed rows on the H200,
# benchmarks/RESULTS.md, twenty-eighth round; in narrow tiles of 1-4 rows and 1-2 warps, with dp4a for int8, still up
# to 1.8x (int8) and 5.3x (FP8) as long at 2-8 tokens, level at best, on an H100, thirty-fifth round); blocks of 1-2
# weight rows, one warp each, measured fastest at one token
TILES_ONE = ((1, 256, 1, 1), (1, 1024, 1, 1), (2, 512, 1, 1), (2, 1024, 1, 1), (4, 512, 1, 1), (4, 1024, 2, 1),
             (8, 1024, 4, 1))
# token blocks of 128 and 256 (the MMA's narrow side holds up to 256): the weight is read once per
# token block, at the cost of a larger accumulator per program
TILES_TALL = {128: ((64, 128, 4, 4), (64, 128, 8, 4), (128, 64, 8, 4), (128, 128, 8, 3), (128, 128, 8, 4),
                    (128, 128, 8, 5), (64, 256, 4, 4), (128, 256, 8, 3)),
              256: ((64, 64, 4, 4), (64, 128, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (128, 128, 8, 4),
                    (64, 128, 4, 4), (128, 64, 8, 6), (64, 64, 8, 6))}
SPLITS = (1, 2, 4, 8)
PICTURE = "small_m_gemm_sweep.png"
LOG = "sweep_small_m_gemm.log"
SPLIT_MARGIN = 0.03


def candidates(m: int) -> list[tuple[int, tuple]]:
    """(BLOCK_M, tiles) pairs swept for M tokens. At one token also one-token blocks (``TILES_ONE``). At 17-32 tokens
    also 16-token blocks, which launch side by side
    (``gemm_launch.tokens_first``) and so read each weight tile from L2 after the first: on the H200 they won on int8
    o at 32 tokens; at 64 they and 32-token blocks were 8-79% slower than one block on gate_up and down, and never
    the fastest (benchmarks/RESULTS.md, twenty-sixth round)."""
    if m == 1:
        return [(16, TILES_NARROW), (1, TILES_ONE)]
    if m <= 16:
        return [(16, TILES_NARROW)]
    if m <= 32:
        return [(32, TILES_WIDE), (16, TILES_NARROW)]
    if m <= 64:
        return [(64, TILES_WIDE)]
    return [(64, TILES_WIDE)] + [(bm, TILES_TALL[bm]) for bm in TILES_TALL if bm < 2 * m]  # under half empty


def configs(m: int, k: int, fixed: dict | None = None) -> list[dict]:
    """The configs tried for M tokens and a K: every candidate tile with each split count that leaves two
    K blocks per split at least; only ``fixed`` when given (``--retime``)."""
    if fixed is not None:
        return [fixed]
    out = []
    for bm, bn, bk, warps, stages in [(bm, *t) for bm, tiles in candidates(m) for t in tiles]:
        for splits in SPLITS:
            if splits == 1 or -(-k // bk) >= 2 * splits:
                out.append(dict(BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, splits=splits, num_warps=warps,
                                num_stages=stages))
    return out


def _activation(kind: str, m: int, k: int, fp8_dtype):
    if kind == "int8":
        xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
    else:
        xq = (torch.randn(m, k, device="cuda") * 4).to(fp8_dtype)
    return xq, torch.rand(m, 1, device="cuda") * 0.01 + 1e-3, torch.full((1, 1), 0.005, device="cuda")


def torch_times(p: GemmProblem, xq, xs_tok, xs_ten, weights) -> dict[str, float]:
    """GPU microseconds of the torch providers the chain would otherwise pick for ``p`` (per-token, bf16 out),
    bound outside the capture: ``torch._scaled_mm`` in each of its ways (tensor-wise with one weight scale)."""
    t = {}
    if p.kind == "fp8":
        p_ten = dataclasses.replace(p, per_token=False, per_channel=False)
        for way, prob, xs in ((g.SCALED_MM_TENSOR_WISE, p_ten, xs_ten), (g.SCALED_MM_ROW_WISE, p, xs_tok),
                              (g.SCALED_MM_FP32, p, xs_tok)):
            calls = [g.bind_scaled_mm(prob, w, ws if prob.per_channel else ws[:1], None, way) for w, ws in weights]
            t[way] = graph_us([lambda c=c, xs=xs: c(xq, xs) for c in calls])
    else:
        binds = {"triton_int8": g.bind_triton_int8}
        if p.m > 16:
            binds = {"int_mm_int8": g.bind_int_mm, **binds}
        for name, bind in binds.items():
            calls = [bind(p, w, ws, None) for w, ws in weights]
            t[name] = graph_us([lambda c=c: c(xq, xs_tok) for c in calls])
    return t


def error_bound(kind: str, k: int) -> float:
    """The largest ``_error`` a kept config may show (fp32 out, relative to sum |x||w| * xs * ws): int8's
    exact accumulator leaves the fp32 scaling and its rounding; FP8 adds the fp32 sum of K products and
    the tensor cores' reduced-precision partial sums (4 * 2^-13, the allowance of
    ``tests.helpers.assert_gemm_close``). A config that drops or repeats part of K lands near 1e-2."""
    return 5 * 2.0**-24 if kind == "int8" else (k + 5) * 2.0**-24 + 4 * 2.0**-13


def _error(out, xq, xs, w, ws) -> float:
    ref = (xq.double() @ w.double().T) * xs.double() * ws.double().T
    mag = (xq.double().abs() @ w.double().abs().T) * xs.double() * ws.double().T
    return float(((out.double() - ref).abs() / (mag + 1e-30)).max())


def sweep(kinds, shapes, ms, log, save, retime: dict | None = None, note=None, model: str | None = None,
          before: list[dict] = ()) -> list[dict]:
    """The rows (GPU ``model``'s own where given: its name as each row's ``device``); ``log`` takes a line per row (and
    per config that could not run), ``note`` (when given) each config timed as ``note(kind, shape, m, us, cfg)``.
    ``before``: the rows of a run cut short (``--resume``), kept; their (kind, N, K, M) are not timed again. The rows
    are keyed on the arch the provider reads them under (``decode.table_arch``) and FP8 is the platform's format
    (e4m3fnuz on gfx94x)."""
    from fused_quant.registry import platform_fp8_dtype

    arch, fp8 = table_arch(torch.cuda.current_device()), platform_fp8_dtype()
    rows = list(before)
    # by shape, not label: --model / --tp give the labels other shapes
    done_already = {(r["kind"], r["n"], r["k"], r["m"]) for r in rows}
    done, total, start = 0, len(shapes) * len(kinds) * len(ms), time.perf_counter()
    for label, (n, k) in shapes.items():
        for kind in kinds:
            if all((kind, n, k, m) in done_already for m in ms):
                done += len(ms)
                log(f"{kind:4s} {label:7s} kept from the run resumed")
                continue
            weights = _weights(kind, n, k, copies_for(n * k), fp8)
            for m in ms:
                done += 1
                if (kind, n, k, m) in done_already:
                    log(f"{kind:4s} {label:7s} M={m:4d} kept from the run resumed")
                    continue
                xq, xs_tok, xs_ten = _activation(kind, m, k, fp8)
                w, ws = weights[0]
                fixed = None if retime is None else retime.get((arch, kind, n, k, m))
                if retime is not None and fixed is None:
                    log(f"{kind:4s} {label:7s} M={m:4d} not in the installed table and not seeded (--seed-from B "
                        f"with a row at B): not retimed")
                    continue
                p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
                tt = torch_times(p, xq, xs_tok, xs_ten, weights)
                best_torch = min(tt, key=tt.get)
                trials = []
                for cfg in configs(m, k, fixed):
                    try:
                        calls = [g.bind_small_m(p, w_, ws_, None, cfg) for w_, ws_ in weights]
                        calls[0](xq, xs_tok)
                        us = graph_us([lambda c=c: c(xq, xs_tok) for c in calls])
                    except Exception as exc:  # a config the GPU cannot hold (shared memory, registers)
                        log(f"  skip {cfg}: {type(exc).__name__}: {str(exc)[:120]}")
                        continue
                    trials.append((us, cfg))
                    if note is not None:
                        note(kind, label, m, us, cfg)
                if not trials:  # every config failed on this GPU (with --retime: the one it had)
                    log(f"{kind:4s} {label:7s} M={m:4d} no config ran here: the row is left as it was")
                    continue
                us, cfg = min(trials, key=lambda t: t[0])
                # one launch (no split-K reduction, no partials to allocate) costs the host less: it wins
                # unless split-K is more than SPLIT_MARGIN faster on the GPU
                single = [t for t in trials if t[1]["splits"] == 1]
                if single and min(single, key=lambda t: t[0])[0] <= us * (1 + SPLIT_MARGIN):
                    us, cfg = min(single, key=lambda t: t[0])
                p32 = dataclasses.replace(p, out_dtype=torch.float32)
                err = _error(g.bind_small_m(p32, w, ws, None, cfg)(xq, xs_tok), xq, xs_tok, w, ws)
                bound = error_bound(kind, k)
                if not err <= bound:  # a wrong result is a kernel bug: stop, keep nothing of it
                    raise RuntimeError(f"{kind} {label} M={m}: config {cfg} is off by {err:.2e} against float64 "
                                       f"(bound {bound:.2e})")
                row = dict(arch=arch, kind=kind, shape=label, n=n, k=k, m=m, **cfg, us=round(us, 2),
                           torch_us=round(tt[best_torch], 2), torch=best_torch,
                           weight_TBps=round(n * k / (us * 1e-6) / 1e12, 3), rel_err=err,
                           torch_all={name: round(v, 2) for name, v in tt.items()})
                if model is not None:
                    row["device"] = model
                rows.append(row)
                save(rows)
                log(f"{kind:4s} {label:7s} M={m:4d} ours {us:7.1f} us ({row['weight_TBps']:.2f} TB/s) "
                    f"{best_torch} {tt[best_torch]:7.1f} us  x{tt[best_torch] / us:.2f}  {cfg}  err {err:.1e}  "
                    + progress(done, total, start))
            del weights
            torch.cuda.empty_cache()
    return rows


def trial_line(kind: str, shape: str, m: int, us: float, cfg: dict) -> str:
    """The log's line of one config timed (``parse_trials`` reads it back)."""
    return f"  {kind} {shape} M={m} {us:8.2f} us  {cfg}"


_TRIAL = re.compile(r"^  (\w+) (\w+) M=(\d+) +([\d.]+) us  (\{.*\})$")


def parse_trials(lines) -> list[dict]:
    """The configs timed, from a sweep's log lines (``trial_line``; other lines are skipped)."""
    out = []
    for line in lines:
        hit = _TRIAL.match(line.rstrip("\n"))
        if hit:
            kind, shape, m, us, cfg = hit.groups()
            out.append(dict(kind=kind, shape=shape, m=int(m), us=float(us), **ast.literal_eval(cfg)))
    return out


def plot(rows: list[dict], trials: list[dict], path: Path) -> bool:
    """A panel per shape: every config timed (dots) at each token count, the pick (a ring) and the fastest torch
    provider the row holds (a bar), FP8 left of the count and int8 right. False where matplotlib is not installed."""
    plt = pyplot()
    if plt is None:
        return False
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4.5), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        ms = sorted({r["m"] for r in rows if r["shape"] == shape})
        for kind, dx, color in (("fp8", -0.18, "tab:blue"), ("int8", 0.18, "tab:orange")):
            xs = {m: i + dx for i, m in enumerate(ms)}
            tried = [t for t in trials if t["shape"] == shape and t["kind"] == kind and t["m"] in xs]
            ax.scatter([xs[t["m"]] for t in tried], [t["us"] for t in tried], s=6, color=color, alpha=0.35)
            picked = [r for r in rows if r["shape"] == shape and r["kind"] == kind]
            ax.scatter([xs[r["m"]] for r in picked], [r["us"] for r in picked], s=60, facecolors="none",
                       edgecolors=color, label=f"{kind}: the pick (dots: every config)")
            ax.scatter([xs[r["m"]] for r in picked], [r["torch_us"] for r in picked], marker="_", s=200, color=color,
                       label=f"{kind}: fastest torch provider")
        ax.set_xticks(range(len(ms)), [str(m) for m in ms])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plt.matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(plt.matplotlib.ticker.FormatStrFormatter("%g"))
        row = next(r for r in rows if r["shape"] == shape)
        ax.set_title(f"{shape} (N={row['n']}, K={row['k']})")
        ax.set_xlabel("M (tokens)")
    return save_figure(fig, axes[0][0], path, "GPU us per call (graph replay)", legend_size=7)


def parse_args(argv=None) -> tuple[argparse.Namespace, list[str], list[str], list[int]]:
    """The options (``args.decoder``: the ``models.Model`` of ``--model`` / ``--tp``), and the kinds, shapes and token
    counts to sweep, each once in the order given (a usage error, exit code 2, for a value the sweep would not
    read)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sweep_small_m_gemm", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for small_m_gemm_configs.json, the log and the picture")
    ap.add_argument("--kinds", default="fp8,int8")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--ms", default=",".join(map(str, g.M_BUCKETS)))
    ap.add_argument("--install", action="store_true", help="also copy the table into fused_quant/kernels/")
    ap.add_argument("--retime", action="store_true",
                    help="no search: time the installed table's config of each row again beside the torch providers")
    ap.add_argument("--seed-from", type=functools.partial(whole_number, what="a token count"), metavar="B",
                    help="with --retime: an M the installed table lacks is timed with token count B's config")
    ap.add_argument("--own-rows", action="store_true",
                    help="write the rows as this GPU model's own: installed beside the arch's, they serve this model "
                         "only (with --retime, the configs it takes now are timed: its own rows', else the arch's)")
    ap.add_argument("--replot", nargs=2, metavar=("LOG", "TABLE"),
                    help="draw small_m_gemm_sweep.png of a saved sweep's log and table into --out (no GPU)")
    ap.add_argument("--resume", action="store_true",
                    help="go on with the sweep already in --out: keep its rows and log, time only the (kind, shape, "
                         "M) it lacks")
    args, decoder = models.parse(ap, argv)
    args.decoder = decoder
    kinds, shapes = list(dict.fromkeys(args.kinds.split(","))), list(dict.fromkeys(args.shapes.split(",")))
    if any(kind not in ("fp8", "int8") for kind in kinds):
        ap.error(f"--kinds takes fp8 and / or int8, got {args.kinds}")
    try:
        args.decoder.pick(shapes)
    except ValueError as exc:
        ap.error(str(exc))
    ms = token_counts(ap, "--ms", args.ms, g.M_BUCKETS)  # gemm_launch's buckets: a row at another M is never read
    if args.replot and (args.install or args.retime or args.seed_from is not None or args.own_rows):
        ap.error("--replot only draws a saved sweep; it takes no --install, --retime, --seed-from or --own-rows")
    if args.replot and args.resume:
        ap.error("--replot only draws a saved sweep; it takes no --resume")
    if args.seed_from is not None and not args.retime:
        ap.error("--seed-from goes with --retime")
    if args.seed_from is not None and args.seed_from not in g.M_BUCKETS:
        ap.error(f"--seed-from takes a token count of gemm_launch.M_BUCKETS {g.M_BUCKETS}, got {args.seed_from}")
    return args, kinds, shapes, ms


def main(argv=None) -> int:
    args, kinds, shapes, ms = parse_args(argv)
    if args.replot:
        return replot(*(Path(p) for p in args.replot), Path(args.out), kinds, args.decoder.pick(shapes), ms)
    if not torch.cuda.is_available():
        print("sweep_small_m_gemm: needs a GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    out = Path(args.out)
    problem = made_folder(out) or out_problem(out, args.resume)
    if problem:
        print(f"sweep_small_m_gemm: {problem}", file=sys.stderr)
        return 2
    from fused_quant.kernels import launch

    path = out / g.SMALL_M_CONFIG_FILE.name
    model = launch.device_name(torch.cuda.current_device()) if args.own_rows else None
    meta = {**versions(), "script": "benchmarks/sweep_small_m_gemm.py",
            "pdl": bool(launch.pdl_options(torch.cuda.current_device())["PDL"])}
    if args.retime:
        meta["retime"] = True
        if args.seed_from is not None:
            meta["seed_from"] = args.seed_from
    before, problem = resumed_rows(path, meta, model) if args.resume else ([], "")
    if problem:
        print(f"sweep_small_m_gemm: --resume: {problem}", file=sys.stderr)
        return 2
    with Log(out / LOG, append=args.resume) as log:
        t0 = time.time()

        def save(rows: list[dict]) -> None:  # after every row: a run cut short keeps what it measured
            meta["seconds"] = round(time.time() - t0)
            write_atomically(path, json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")

        retime = None
        if args.retime:
            installed = json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"]
            retime = retime_configs(installed, ms, args.seed_from, model)
        trials = []

        def note(kind, shape, m, us, cfg) -> None:  # every config timed: a line of the log, a dot of the picture
            log.quiet(trial_line(kind, shape, m, us, cfg))
            trials.append(dict(kind=kind, shape=shape, m=m, us=us, **cfg))

        rows = sweep(kinds, args.decoder.pick(shapes), ms, log, save, retime, note, model, before)
        save(rows)  # also when no row was swept (a retime of rows the table lacks): an empty table, not none
        if not rows:
            log(f"no rows swept (kinds {args.kinds}, shapes {args.shapes}, M {args.ms}"
                f"{', retime: none of them in the installed table' if retime is not None else ''})")
        log(f"wrote {path} ({len(rows)} rows, {meta['seconds']} s)")
        if args.install:
            for line in install(path):
                log(f"the chain's pick changed: {line}")
        if rows and not plot(rows, trials, out / PICTURE):
            log(f"matplotlib is not installed: no {PICTURE} (--replot draws it later)")
    return 0


def out_problem(out: Path, resume: bool) -> str:
    """Why ``out`` cannot take this sweep ("" where it can): the package's own folder (the sweep's table has the
    installed table's name, and the first row saved would replace it: ``--install`` merges), or a folder holding a
    sweep already, unless ``resume`` goes on with it (a new run would write over what it measured)."""
    over = writes_over_installed(out, g.SMALL_M_CONFIG_FILE)
    if over:
        return over
    held = [name for name in (g.SMALL_M_CONFIG_FILE.name, LOG) if (out / name).exists()]
    if held and not resume:
        return (f"--out {out} holds a sweep already ({', '.join(held)}): --resume goes on with it, or pick another "
                "folder")
    return ""


def writes_over_installed(out: Path, table: Path) -> str:
    """Why a run cannot write into ``out`` ("" where it can): the folder of the installed ``table``, where the run's
    own output, of the same name, would replace it before ``--install`` merges the two."""
    if out.resolve() != table.parent.resolve():
        return ""
    return (f"--out {out} is the package's folder: the run's {table.name} would write over the installed one before "
            "--install merges it in; write it elsewhere")


def resumed_rows(path: Path, now: dict, model: str | None) -> tuple[list[dict], str]:
    """(the rows of the sweep at ``path`` that ``--resume`` goes on with, "") or ([], why they cannot be): ``now`` is
    the meta this run writes (``timing.versions``, ``pdl``, ``retime``, ``seed_from``). A run on another GPU, of
    another model's rows (``--own-rows``), of the other mode (``--retime``), with PDL the other way, with other torch /
    Triton / CUDA versions, another ``--seed-from`` or other FUSED_QUANT_* variables would mix in one table, under
    one meta, rows that were not measured alike."""
    if not path.is_file():
        return [], ""
    try:
        saved = json.loads(path.read_text())
        meta, rows = saved["meta"], saved["rows"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [], f"{path} is not a sweep's table this script writes ({type(exc).__name__}: {exc})"
    if meta.get("device") != now["device"]:
        return [], f"{path} was swept on {meta.get('device')}, this GPU is {now['device']}"
    if bool(meta.get("retime")) != bool(now.get("retime")):
        return [], f"{path} was {'a retime' if meta.get('retime') else 'a search'}; resume it the same way"
    if meta.get("pdl") is not None and bool(meta["pdl"]) != bool(now["pdl"]):
        return [], f"{path} was swept with PDL {'on' if meta['pdl'] else 'off'}; FUSED_QUANT_PDL is not so now"
    then, here = _measured_with(meta), _measured_with(now)
    differs = [name for name in {**then, **here} if then.get(name) != here.get(name)]
    if differs:
        def said(values: dict) -> str:
            return ", ".join(f"{name} {'unset' if values.get(name) is None else values[name]}" for name in differs)

        return [], f"{path} was swept with {said(then)}; this run has {said(here)}"
    owners = {r.get("device") for r in rows}
    if owners - {model}:
        mine = f"{model}'s own rows" if model else "the arch's rows"
        return [], f"{path} holds rows of {sorted(map(str, owners))}, this run writes {mine} (--own-rows)"
    return rows, ""


def _measured_with(meta: dict) -> dict:
    """What a sweep's ``meta`` says its rows were measured with, beyond the GPU and the mode: the torch, Triton and
    CUDA versions, ``--seed-from`` and every FUSED_QUANT_* variable set (None: not set, or not recorded)."""
    return {"torch": meta.get("torch"), "triton": meta.get("triton"), "cuda": meta.get("cuda"),
            "--seed-from": meta.get("seed_from"), **meta.get("env", {})}


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a run stopped mid-write leaves the file as it was (and no part file
    where the write or the rename fails)."""
    part = path.with_name(path.name + ".part")
    try:
        part.write_text(text)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def replot(log_path: Path, table_path: Path, out: Path, kinds, shapes, ms) -> int:
    """``--replot``: the picture of a saved sweep's log and table, for the rows of the kinds, shapes and token counts
    asked (every one by default) of one arch; 2 with a line saying why where there is nothing to draw."""
    try:
        rows = json.loads(table_path.read_text())["rows"]
        trials = parse_trials(log_path.read_text().splitlines())
        # by (N, K): the same label names other shapes in another model's rows
        rows = [r for r in rows if r["kind"] in kinds and (r["n"], r["k"]) in shapes.values() and r["m"] in ms]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # TypeError: JSON of another shape
        print(f"sweep_small_m_gemm: --replot reads a sweep's log and its small_m_gemm_configs.json: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    tables = sorted({_table_name(r) for r in rows})
    if len(tables) != 1:
        print(f"sweep_small_m_gemm: --replot draws the rows of one arch or GPU model; {table_path} has "
              f"{tables or 'none'} for kinds {kinds}, shapes {shapes}, M {ms}", file=sys.stderr)
        return 2
    problem = made_folder(out)
    if problem:
        print(f"sweep_small_m_gemm: {problem}", file=sys.stderr)
        return 2
    if not plot(rows, trials, out / PICTURE):
        print("sweep_small_m_gemm: --replot needs matplotlib", file=sys.stderr)
        return 2
    return 0


def retime_configs(rows: list[dict], ms: list[int], seed_from: int | None = None,
                   model: str | None = None) -> dict[tuple, dict]:
    """``--retime``'s configs by (arch, kind, N, K, M): each installed row's that GPU ``model`` takes (its own rows',
    else the arch's; other models' rows are not read), and with ``seed_from`` for every M of ``ms`` an (arch, kind,
    N, K) lacks, the config of its row at ``seed_from``."""
    taken = [r for r in rows if r.get("device") is None] + [r for r in rows if model and r.get("device") == model]
    configs_ = {_problem_key(r): {f: r[f] for f in g.CONFIG_FIELDS} for r in taken}
    if seed_from is not None:
        for r in taken:
            if r["m"] == seed_from:
                for m in ms:
                    configs_.setdefault((r["arch"], r["kind"], r["n"], r["k"], m), configs_[_problem_key(r)])
    return configs_


def _problem_key(row: dict) -> tuple:
    return row["arch"], row["kind"], row["n"], row["k"], row["m"]


def _row_key(row: dict) -> tuple:
    """A row's place in the table: its problem, and whose rows it is among (None: the arch's; a GPU model's name)."""
    return (*_problem_key(row), row.get("device"))


def _table_name(row: dict) -> str:
    return row["arch"] if row.get("device") is None else f"{row['arch']} {row['device']}"


def install(path: Path, table: Path | None = None, timed: bool = True) -> list[str]:
    """Merge a sweep's rows into the package's table (``table``, default the provider's file): each swept
    (arch, kind, N, K, M) replaces its old row among the arch's rows or, for a GPU model's own rows (``--own-rows``),
    among that model's; the rest stay, so a sweep split over calls (``--kinds``, ``--shapes``, ``--ms``) installs
    part by part. Each installed row names the GPU and date it was swept on (``"swept"``, where the sweep's meta has
    them) and, from a ``--retime``, that its config was timed again, not searched (``"retimed"``). The arch's meta
    (``"metas"``) or the model's (``"models"``), which ``fused-quant probe`` prints as where and how the rows were
    measured, becomes the sweep's only where the install replaces every row it describes (``_described``) or there
    is none yet: a part (one row retimed, rows of new shapes) leaves it to the rest, each installed row stamped.
    Returns ``pick_changes`` against the rows each problem took before.

    Refused with a ValueError, the table untouched: rows the provider would refuse to read (``gemm_launch.check_rows``;
    ``timed``: with the torch providers' times, as the GEMM table's rows have them), and rows that replace part of the
    arch's rows its meta describes, swept on another GPU model (the arch's shapes would hold rows of two models under
    the meta of one: install them as that model's own rows, the sweep's ``--own-rows``, or sweep every row the arch
    has). The table is written whole or not at all."""
    table = table or g.SMALL_M_CONFIG_FILE
    new = json.loads(path.read_text())
    g.check_rows(new["rows"], str(path), timed)
    meta = new["meta"]
    stamp = {"swept": f"{meta['device']} {meta['date']}"} if meta.get("device") and meta.get("date") else {}
    if meta.get("retime"):
        stamp["retimed"] = True
    swept = {_row_key(r): {**r, **stamp} for r in new["rows"]}
    old = json.loads(table.read_text()) if table.is_file() else {"rows": []}
    metas, models = dict(old.get("metas", {})), dict(old.get("models", {}))
    for arch, model in dict.fromkeys((r["arch"], r.get("device")) for r in new["rows"]):
        owner, name = (metas, arch) if model is None else (models, model)  # the meta of these rows, by its key
        theirs = _described(owner.get(name), [r for r in old["rows"] if (r["arch"], r.get("device")) == (arch, model)])
        replaced = sum(_row_key(r) in swept for r in theirs)
        was, now = owner.get(name, {}).get("device"), meta.get("device")
        if model is None and was and now and was != now and 0 < replaced < len(theirs):
            raise ValueError(f"{arch}'s rows in {table} were swept on {was}; these, from {now}, replace {replaced} of "
                             f"them and {len(theirs) - replaced} would stay as {was} measured them: install them as "
                             f"{now}'s own rows (the sweep's --own-rows), or sweep every row the arch has")
        if name not in owner or replaced == len(theirs):
            owner[name] = meta
    rows = [swept.get(_row_key(r), r) for r in old["rows"]]  # in place: the table's order stays
    have = {_row_key(r) for r in old["rows"]}
    rows += [r for key, r in swept.items() if key not in have]
    write_atomically(table, json.dumps({"metas": metas, **({"models": models} if models else {}), "rows": rows},
                                       indent=1) + "\n")
    return pick_changes(old["rows"], new["rows"])


def _described(meta: dict | None, rows: list[dict]) -> list[dict]:
    """The rows of ``rows`` (an arch's, or a GPU model's own) that their ``meta`` describes: those without a
    ``"swept"`` stamp (installed before rows had one) and those stamped with the meta's GPU (the stamp is
    "<device> <date>"). Rows another GPU added (new shapes) carry only their own stamp."""
    device = (meta or {}).get("device")
    return [r for r in rows if "swept" not in r or r["swept"].rsplit(" ", 1)[0] == device]


# The torch providers a chain may weigh the small-M GEMM against (``gemm_launch.torch_peers``): FP8 problems by the ways
# of ``torch._scaled_mm`` (tensor-wise; row-wise or the fp32 product for bf16 output; the fp32 product for other
# output), int8 ones by every provider the row timed (None) or the one a chain has after it
FP8_PEER_SETS = ((g.SCALED_MM_TENSOR_WISE,), (g.SCALED_MM_ROW_WISE, g.SCALED_MM_FP32), (g.SCALED_MM_FP32,))


def _peer_time(row: dict, peers) -> str:
    name, us = g.torch_time(row, peers)
    return f"{name} {us:.2f}" if name is not None else "no torch time"


def pick_changes(old_rows: list[dict], new_rows: list[dict]) -> list[str]:
    """A line for each swept row that replaces an installed one and turns a problem from the small-M GEMM to a torch
    provider or back, for some torch peers a chain may weigh it against. The sweep times a row's config again even
    where it keeps it, so a near tie can move a problem (and what the provider does beyond the GEMM, such as the
    one-launch silu_and_mul epilogue); the line gives both times, before and after."""
    old = {_row_key(r): r for r in old_rows}
    lines = []
    for new in new_rows:
        # a GPU model's first own row replaces the arch's row for that model
        before = old.get(_row_key(new)) or old.get((*_problem_key(new), None))
        if before is None or "torch_all" not in before or "torch_all" not in new:
            continue
        peer_sets = FP8_PEER_SETS if new["kind"] == "fp8" else (None, *((name,) for name in new["torch_all"]))
        for peers in peer_sets:
            was, now = (g._faster_config(r, peers)[0] is not None for r in (before, new))
            if was != now:
                against = " / ".join(peers) if peers else "every torch provider timed"
                lines.append(f"{_table_name(new)} {new['kind']} N={new['n']} K={new['k']} M={new['m']} against "
                             f"{against}: "
                             f"{'small-M GEMM -> torch' if was else 'torch -> small-M GEMM'} (small-M {new['us']:.2f} "
                             f"vs {_peer_time(new, peers)} us; before {before['us']:.2f} vs {_peer_time(before, peers)})")
    return lines


if __name__ == "__main__":
    sys.exit(main())
