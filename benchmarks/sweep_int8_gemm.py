"""Sweep the Triton scaled int8 GEMM's tile configs at large M (``gemm_launch.INT8_GEMM_CONFIGS``) on this GPU.

For Llama-3-8B's four linears and each M of ``--ms`` (token counts past the small-M GEMM's buckets): every
candidate config of ``CANDIDATES`` (and 64-token tiles up to ``SMALL_M``), timed through the provider's bound call
(``bind_triton_int8``, what the chain runs) replayed from a CUDA graph (``timing.graph_us``) in two passes, the
second in the reverse order, the lesser time kept (``timed_passes``), beside ``torch._int_mm`` + epilogue, FP8
``torch._scaled_mm`` (the same tensor-core rate on sm_90) and bf16 ``F.linear``. int8 products accumulate exactly in
int32, so every config's output must equal the installed config's bit for bit (checked; a config that differs
stops the sweep). Per M the config with the least time summed over the four shapes is printed as a row of
``INT8_GEMM_CONFIGS`` (one config per M bucket, as the table holds, with how it reads its tiles); the table is
edited by hand from the JSON: ``INT8_GEMM_CONFIGS`` from the sweep of ``INT8_GEMM_MEASURED_ON``,
``INT8_GEMM_DEVICE_CONFIGS`` under the device's name (the log's first line) where another kind's sweep picks other
tiles. "installed" is what the chain runs on this device.

``python -m benchmarks.sweep_int8_gemm --out DIR`` (GPU) writes ``int8_gemm_sweep.json``, its log and
``int8_gemm_sweep.png`` (TOPS against M per shape); ``--replot JSON --out DIR`` draws the picture of a saved run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import fused_quant
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

from benchmarks.decode import SHAPES
from benchmarks.timing import (Log, graph_us, out_folder, pyplot, require_gpu, rows_so_far, save_figure,
                               timed_passes, token_counts, versions)

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, loads): the tiles near the rows past 256 tokens read
# each way of ``INT8_LOADS`` (benchmarks/RESULTS.md, thirty-ninth round: the descriptor kernel 1.14-1.18x the pointer
# kernel's tiles), and the pointer kernel's own picks of the twenty-fifth and thirty-eighth rounds
_TMA_TILES = ((128, 256, 128, 8, 8, 3), (128, 256, 128, 16, 8, 3), (128, 256, 128, 8, 8, 4), (128, 128, 256, 8, 8, 3),
              (128, 128, 128, 8, 4, 4), (256, 128, 128, 8, 8, 3))
CANDIDATES = (tuple((*tile, loads) for loads in ("tma persistent flat", "tma persistent", "tma") for tile in _TMA_TILES)
              + ((128, 256, 128, 16, 8, 3, "pointers"), (128, 128, 256, 8, 8, 3, "pointers"),
                 (128, 128, 64, 8, 4, 5, "pointers")))
# Up to ``SMALL_M`` tokens also 64-token tiles, which give down's 4096 columns and qkv / o twice the output tiles
# of 128-token ones, and the small-M GEMM (the chain's pick there where the small-M table says so) as a peer
SMALL_M = 256
SMALL_TILES = tuple((*tile, loads) for loads in ("tma persistent flat", "tma") for tile in
                    ((64, 128, 128, 8, 4, 4), (64, 256, 128, 8, 4, 4), (64, 128, 256, 8, 4, 3)))


def candidates(m: int) -> tuple:
    """The configs timed at ``m`` tokens."""
    return CANDIDATES + SMALL_TILES if m <= SMALL_M else CANDIDATES


def _bound(p: GemmProblem, w, ws, config: tuple | None):
    """The provider's bound call with ``config`` as the only table row, on every GPU model (None: the installed
    rows, this GPU model's own where it has them)."""
    saved = g.INT8_GEMM_CONFIGS, g.INT8_GEMM_DEVICE_CONFIGS
    if config is not None:
        g.INT8_GEMM_CONFIGS, g.INT8_GEMM_DEVICE_CONFIGS = ((1 << 62, *config),), {}
    fused_quant.reset()  # the launch cache holds the last config's compiled call for this problem
    try:
        return g.bind_triton_int8(p, w, ws, None)
    finally:
        g.INT8_GEMM_CONFIGS, g.INT8_GEMM_DEVICE_CONFIGS = saved


def sweep(ms: list[int], shapes: dict, log, saved=lambda rows: None) -> list[dict]:
    """Each (shape, M)'s row: every candidate tile beside the installed one and the peers; ``saved(rows)`` after each
    row, so that a run stopped part-way keeps what it timed."""
    rows = []
    fp8 = torch.float8_e4m3fn
    for label, (n, k) in shapes.items():
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        ws = torch.rand(n, 1, device="cuda") * 0.01 + 1e-3
        w8 = (torch.randn(n, k, device="cuda") * 4).to(fp8)
        wb = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        for m in ms:
            xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, xq.device, True, True, False)
            installed = _bound(p, w, ws, None)
            expected = installed(xq, xs)
            # a timing thrown away: the first of a shape and M read up to 20% high on an H100 (benchmarks/RESULTS.md,
            # thirty-eighth round, run 3)
            graph_us([lambda: installed(xq, xs)])
            configs, calls = {}, {}
            described, why = g.tma_ok(p, w)
            for cfg in candidates(m):
                if cfg[-1] != "pointers" and not described:  # it would time the pointer kernel under this name
                    configs[str(cfg)] = {"error": f"no tensor descriptors here: {why}"}
                    log(f"  {label} M={m} {cfg}: {configs[str(cfg)]['error']}")
                    continue
                try:
                    call = _bound(p, w, ws, cfg)
                    out = call(xq, xs)
                except Exception as exc:  # e.g. a config past the shared memory: recorded and shown, not timed
                    configs[str(cfg)] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
                    log(f"  {label} M={m} {cfg}: {configs[str(cfg)]['error']}")
                    continue
                if not torch.equal(out.view(torch.int16), expected.view(torch.int16)):
                    raise SystemExit(f"{label} M={m} config {cfg}: output differs from the installed config's")
                calls[str(cfg)] = call
            calls["installed"] = installed
            passes = timed_passes(calls, lambda c: graph_us([lambda: c(xq, xs)]))
            for name, times in passes.items():
                if name != "installed":
                    configs[name] = {"us": min(times), "us_passes": times}
            t = {"installed": min(passes["installed"])}
            int_mm = g.bind_int_mm(p, w, ws, None)
            t["int_mm + epilogue"] = graph_us([lambda: int_mm(xq, xs)])
            x8 = (torch.randn(m, k, device="cuda") * 4).to(fp8)
            one = torch.ones((), device="cuda")
            t["scaled_mm fp8 (tensor-wise)"] = graph_us(
                [lambda: torch._scaled_mm(x8, w8.t(), one, one, out_dtype=torch.bfloat16)])
            xb = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            t["bf16"] = graph_us([lambda: F.linear(xb, wb)])
            if m <= SMALL_M and g.small_m_swept(p)[0]:
                small = g.bind_small_m(p, w, ws, None)
                t["small_m"] = graph_us([lambda: small(xq, xs)])
            timed = {c: v["us"] for c, v in configs.items() if "us" in v}
            if not timed:
                raise SystemExit(f"{label} M={m}: every candidate config failed (see the errors above)")
            best = min(timed, key=timed.get)
            row = {"shape": label, "M": m, "N": n, "K": k, "us": t, "configs": configs, "best": best,
                   "tops": {c: 2 * m * n * k / (us * 1e-6) / 1e12 for c, us in {**t, **timed}.items()}}
            rows.append(row)
            saved(rows)
            log(f"int8 {label:7s} M={m:6d} installed {t['installed']:8.1f} us  best {best} {timed[best]:8.1f}  "
                + "  ".join(f"{name} {v:.1f}" for name, v in t.items() if name != "installed"))
        del w, ws, w8, wb
        torch.cuda.empty_cache()
    return rows


def per_m(rows: list[dict]) -> list[dict]:
    """Per M: each config's time summed over the shapes, the least, and the installed config's sum."""
    out = []
    for m in sorted({r["M"] for r in rows}):
        at = [r for r in rows if r["M"] == m]
        sums = {}
        for c in candidates(m):
            times = [r["configs"].get(str(c), {}).get("us") for r in at]
            if all(v is not None for v in times):
                sums[str(c)] = sum(times)
        if not sums:
            raise SystemExit(f"M={m}: no candidate config ran on every shape (see the log's errors)")
        best = min(sums, key=sums.get)
        out.append({"M": m, "sum_us": sums, "best": best, "installed_sum_us": sum(r["us"]["installed"] for r in at),
                    "int_mm_sum_us": sum(r["us"]["int_mm + epilogue"] for r in at),
                    "fp8_sum_us": sum(r["us"]["scaled_mm fp8 (tensor-wise)"] for r in at),
                    "small_m_sum_us": (sum(r["us"]["small_m"] for r in at) if all("small_m" in r["us"] for r in at)
                                       else None)})
    return out


def plot(result: dict, path: Path) -> bool:
    """Int8 TOPS against M, a panel per shape: the installed tile, the tile picked per M (``per_m``) and the
    peers. False where matplotlib is not installed."""
    plt = pyplot()
    if plt is None:
        return False
    picks = {s["M"]: s["best"] for s in result["per_m"]}
    shapes = list(dict.fromkeys(r["shape"] for r in result["rows"]))
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), sharey=True, squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        rows = sorted((r for r in result["rows"] if r["shape"] == shape), key=lambda r: r["M"])
        ms = [r["M"] for r in rows]
        lines = {"installed tile": [r["tops"]["installed"] for r in rows],
                 "tile picked per M": [r["tops"][picks[r["M"]]] for r in rows]}
        peers = dict.fromkeys(peer for r in rows for peer in r["us"] if peer != "installed")  # small_m: small M only
        lines |= {peer: [r["tops"].get(peer, math.nan) for r in rows] for peer in peers}
        for name, tops in lines.items():
            ax.plot(ms, tops, marker="o", label=name, ls="--" if name == "installed tile" else "-")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{shape} (N={rows[0]['N']}, K={rows[0]['K']})")
        ax.set_xlabel("M (tokens)")
    return save_figure(fig, axes[0][0], path, "TOPS (int8; FP8 and bf16 for the peers)", legend_size=8)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sweep_int8_gemm", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for int8_gemm_sweep.json and its log")
    ap.add_argument("--ms", default="512,1024,2048,4096,16384")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--replot", metavar="JSON", help="draw int8_gemm_sweep.png of a saved run into --out (no GPU)")
    args = ap.parse_args(argv)
    if args.replot:
        try:
            saved = json.loads(Path(args.replot).read_text())
        except (OSError, ValueError) as exc:
            ap.exit(2, f"sweep_int8_gemm: --replot {args.replot} cannot be read: {exc}\n")
        if not (isinstance(saved, dict) and isinstance(saved.get("rows"), list) and isinstance(saved.get("per_m"), list)
                and saved["rows"]):
            ap.exit(2, f"sweep_int8_gemm: --replot {args.replot} is not an int8_gemm_sweep.json this script writes\n")
        if not plot(saved, out_folder(ap, args.out, "sweep_int8_gemm") / "int8_gemm_sweep.png"):
            print("sweep_int8_gemm: --replot needs matplotlib", file=sys.stderr)
            return 2
        return 0
    ms = token_counts(ap, "--ms", args.ms)
    unknown = [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown:
        ap.error(f"--shapes: unknown {', '.join(unknown)}; expected some of {', '.join(SHAPES)}")
    require_gpu(ap, "sweep_int8_gemm")
    shapes = {s: SHAPES[s] for s in args.shapes.split(",")}
    out = out_folder(ap, args.out, "sweep_int8_gemm")
    with Log(out / "int8_gemm_sweep.log") as log:
        index = torch.cuda.current_device()
        log(f"device: {torch.cuda.get_device_name(index)}; installed rows: {g.int8_gemm_rows(index)}")
        start = time.time()

        partial = out / "int8_gemm_sweep.partial.json"  # the rows timed so far, until the run's JSON replaces it
        rows = sweep(ms, shapes, log, rows_so_far(partial))
        summary = per_m(rows)
        for s in summary:
            log(f"M={s['M']:6d} sum over shapes: installed {s['installed_sum_us']:.1f} us, best {s['best']} "
                f"{s['sum_us'][s['best']]:.1f} ({s['installed_sum_us'] / s['sum_us'][s['best']]:.3f}x); "
                f"int_mm + epilogue {s['int_mm_sum_us']:.1f}; FP8 scaled_mm {s['fp8_sum_us']:.1f}"
                + (f"; small-M GEMM {s['small_m_sum_us']:.1f}" if s["small_m_sum_us"] is not None else ""))
        result = {"versions": versions(), "seconds": round(time.time() - start),
                  "candidates": sorted({c for m in ms for c in candidates(m)}, key=str),
                  "rows": rows, "per_m": summary}
        (out / "int8_gemm_sweep.json").write_text(json.dumps(result, indent=1))
        partial.unlink(missing_ok=True)
        if not plot(result, out / "int8_gemm_sweep.png"):
            log("matplotlib is not installed: no int8_gemm_sweep.png (--replot draws it later)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
