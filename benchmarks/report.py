"""Markdown tables for RESULTS.md from the JSON that ``fused-quant bench`` writes, and the decode targets.

``python -m benchmarks.report FILE... [--label NAME] [--sqnr-baseline MLP_JSON]`` reads each file by what it holds:

- ``act_quant.json``: the producer table, the targets table (M = 8192 / 32768) and the small-M table (host work
  included);
- ``gemm.json``, ``mlp.json``, ``host.json`` (several host files: each call's quickest of them): their tables and
  the decode targets (``decode_targets``: each target, the measured range, the worst case and by how much it is
  met or missed); ``--sqnr-baseline`` an earlier ``mlp.json`` whose SQNR the run's must stay within 0.1 dB of;
- an MLP file of the first ``bench`` version (``us``: bf16 / fused / compiled_chain): its rows, ``--label``
  naming the backend column.
"""

from __future__ import annotations

import json
import math
import sys

SMALL_M = (1, 16, 256)
TARGETS = {"static": (92.0, 1.12), "per-token": (85.0, 1.9)}


def _f(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def producer_table(rows: list[dict]) -> list[str]:
    cols = ("ours", "ours_op", "ours_graph", "compiled", "compiled_graph", "eager", "torch_backend", "bare_triton",
            "copy")
    out = ["| op | M | " + " | ".join(cols) + " | ours GB/s | % of ceiling | vs compiled |",
           "|---" * (len(cols) + 5) + "|"]
    for r in rows:
        us = r["us"]
        tail = f" | {r['GBps']['ours']:.0f} | {r['pct_ceiling']['ours']:.1f}% | {r['speedup_vs']['compiled']:.2f}x |"
        out.append(f"| {r['op']} | {r['M']} | " + " | ".join(_f(us.get(c)) for c in cols) + tail)
    return out


def targets_table(rows: list[dict]) -> list[str]:
    by = {(r["op"], r["M"]): r for r in rows}
    out = ["| producer | M = 8192 | M = 32768 | vs compiled (8192 / 32768) | target | status |",
           "|---|---|---|---|---|---|"]
    for op in dict.fromkeys(r["op"] for r in rows):
        if (op, 8192) not in by or (op, 32768) not in by:  # a run with other M
            continue
        a, b = by[(op, 8192)], by[(op, 32768)]
        kind = "per-token" if "per-token" in op else "static"
        pct, speed = TARGETS[kind]
        has_target = not op.startswith("relu2 -> int8 static")
        pa, pb = a["pct_ceiling"]["ours"], b["pct_ceiling"]["ours"]
        sa, sb = a["speedup_vs"]["compiled"], b["speedup_vs"]["compiled"]
        met = min(pa, pb) >= pct and min(sa, sb) >= speed
        status = ("**met**" if met else "missed") if has_target else ""
        target = f">= {pct:g}%, >= {speed:g}x" if has_target else "(none)"
        out.append(f"| {op} | {pa:.1f}% | {pb:.1f}% | {sa:.2f}x / {sb:.2f}x | {target} | {status} |")
    return out


def small_m_table(rows: list[dict]) -> list[str]:
    out = ["| op | M | ours (public) | ours_op | bare launch | compiled | ours vs compiled | ours_graph | "
           "compiled_graph |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        us = r["us"]
        if r["M"] not in SMALL_M or "ours_loop" not in us:
            continue
        out.append(f"| {r['op']} | {r['M']} | {_f(us['ours_loop'])} | {_f(us['ours_op_loop'])} | "
                   f"{_f(us.get('bare_triton_loop'))} | {_f(us['compiled_loop'])} | "
                   f"{us['compiled_loop'] / us['ours_loop']:.2f}x | {_f(us.get('ours_graph'))} | "
                   f"{_f(us.get('compiled_graph'))} |")
    return out


def mlp_rows(result: dict, label: str) -> list[str]:
    """The rows of an MLP file of the first ``bench`` version (one time per provider and M)."""
    rows = next(v for v in result.values() if isinstance(v, list))
    return [f"| {label} | {r['kind']} | {r['M']} | {r['us']['bf16']:.1f} | {r['us']['fused']:.1f} | "
            f"{r['us']['compiled_chain']:.1f} | {r['speedup_vs_bf16']:.2f}x | {r['speedup_vs_compiled_chain']:.2f}x |"
            for r in rows]


# The decode targets, set for Llama-3-8B's linears and MLP on an H200 (benchmarks/RESULTS.md, "Targets"):
GEMM_FEW_M = (1, 2, 4, 8, 16)
GEMM_TBPS_FEW, GEMM_PCT_FEW, GEMM_TBPS_64 = 3.6, 85.0, 3.0  # weight TB/s at M = 1-16 (and % of the copy ceiling); at 64
# FP8 down at M = 16 against torch._scaled_mm twice: with its own scaling (row-wise: ``bench gemm``'s problems are
# per-token), as the target's figures were measured, and in the quickest way it runs there, which may be its
# unscaled fp32 product with our epilogue (the way the chain itself takes at 64-256 tokens)
DOWN_VS_SCALED_MM = 1.4
SCALED_MM_OWN = "scaled_mm (row-wise)"
SCALED_MM_WAYS = (SCALED_MM_OWN, "scaled_mm (fp32 + epilogue)")
MLP_GRAPH = (((1, 16), 1.9), ((64,), 1.7), ((256,), 1.6))  # x bf16 under graph replay
MLP_GRAPH_STRETCH = ((1, 16), 2.2)
MLP_EAGER = ((1, 16), 1.3)
# At M >= 1024 no worse than the graph speed-ups measured before the small-M work: FP8 1.61-1.71 at 1024 and
# 1.72-1.85 at 4096 / 16384 (the two FP8 keys together), int8 1.58 at 1024 (no figure at 4096 / 16384). Which key
# and M had which end of a range was not recorded, so each takes its range's lower end.
MLP_LARGE = {1024: {"fp8_static": 1.61, "fp8_token": 1.61, "int8_token": 1.58},
             4096: {"fp8_static": 1.72, "fp8_token": 1.72}, 16384: {"fp8_static": 1.72, "fp8_token": 1.72}}
SQNR_DROP_DB = 0.1  # MLP output SQNR against bf16 no more than this below the baseline's
HOST_US = 12.0  # host time of one QuantLinear call and of one producer call at M = 1
TARGET_DEVICE, TARGET_MODEL = "NVIDIA H200", "Llama-3-8B"
# the providers in ``bench gemm``'s rows that are not the chain's pick: ``ours`` is the pick timed through the layer and
# ``bf16`` another problem
NOT_PEERS = ("ours", "bf16")


def _provider(name: str) -> str:
    """A provider's name without its kind, as ``bench gemm``'s columns write it (the chain's ``scaled_mm_fp8
    (row-wise)`` is the column ``scaled_mm (row-wise)``, ``small_m_int8`` the column ``small_m``)."""
    return name.replace("_fp8", "").replace("_int8", "")


def best_other(row: dict) -> tuple[str, float] | None:
    """The quickest provider of a ``bench gemm`` row other than the one the chain picked, and its time (None where
    the row timed no other): torch's (``torch._scaled_mm`` in each way, ``torch._int_mm`` + epilogue), the
    package's Triton int8 GEMM (the only int8 peer at M <= 16, where ``torch._int_mm`` refuses the problem) and
    its small-M kernel where the chain picked another. The picked provider's own column is the same kernel as
    ``ours``, timed a second time, so it is never its peer."""
    picked = _provider(row["picked"])
    others = {name: us for name, us in row["us"].items() if name not in NOT_PEERS and _provider(name) != picked}
    if not others:
        return None
    name = min(others, key=others.get)
    return name, others[name]


def speedup_vs_best_other(row: dict) -> float | None:
    """``best_other``'s time / the chain's: over 1 where the chain's pick is the quicker."""
    best = best_other(row)
    return None if best is None else best[1] / row["us"]["ours"]


def _ms(ms: tuple[int, ...]) -> str:
    return f"M = {ms[0]}-{ms[-1]}" if len(ms) > 2 else "M = " + " / ".join(map(str, ms))


def verdict(target: str, cases: list[tuple[str, float, float]], unit: str = "", higher: bool = True,
            digits: int = 2) -> list[str]:
    """One row of the targets table: ``cases`` are (where, measured, bound); the worst case is the one whose
    measured value is furthest on the wrong side of (or least over) its bound."""
    if not cases:
        return [target, "—", "—", "not in these files"]
    broken = [(where, v) for where, v, _ in cases if not math.isfinite(v)]
    if broken:  # a timing that failed (NaN) or a zero time (inf): no verdict on it
        return [target, "—", f"{broken[0][0]}: {broken[0][1]}", "not measured: a value is not finite"]
    margins = [(v - b if higher else b - v, where, v) for where, v, b in cases]
    margin, where, value = min(margins)
    values = [v for _, v, _ in cases]
    shown = digits  # a miss never reads "by 0.00": the row takes the digits that show it
    while margin < 0 and round(-margin, shown) == 0 and shown < digits + 4:
        shown += 1
    span = (f"{min(values):.{shown}f}-{max(values):.{shown}f}{unit}" if len(values) > 1
            else f"{values[0]:.{shown}f}{unit}")
    if margin >= 0:
        return [target, span, f"{where}: {value:.{shown}f}{unit}", "**met**"]
    by = f"{-margin:.{shown}f}" if round(-margin, shown) else f"< {10.0**-shown:.{shown}f}"
    return [target, span, f"{where}: {value:.{shown}f}{unit}", f"missed by {by}{unit}"]


def gemm_targets(gemm: dict) -> list[list[str]]:
    rows = gemm["rows"]

    def at(ms, field):
        return [(f"{r['shape']} {r['kind']} M={r['M']}", r[field]["ours"]) for r in rows if r["M"] in ms]

    out = [verdict(f"GEMM weights >= {GEMM_TBPS_FEW} TB/s at {_ms(GEMM_FEW_M)}",
                   [(w, v, GEMM_TBPS_FEW) for w, v in at(GEMM_FEW_M, "weight_TBps")], " TB/s"),
           verdict(f"GEMM >= {GEMM_PCT_FEW:g}% of the copy ceiling at {_ms(GEMM_FEW_M)}",
                   [(w, v, GEMM_PCT_FEW) for w, v in at(GEMM_FEW_M, "pct_ceiling")], "%", digits=1),
           verdict(f"GEMM weights >= {GEMM_TBPS_64} TB/s at M = 64",
                   [(w, v, GEMM_TBPS_64) for w, v in at((64,), "weight_TBps")], " TB/s")]
    down = [r for r in rows if r["shape"] == "down" and r["kind"] == "fp8" and r["M"] == 16]
    for label, ways in (("with its own scaling", (SCALED_MM_OWN,)), ("in its quickest way", SCALED_MM_WAYS)):
        cases = []
        for r in down:
            forms = {name: r["us"][name] for name in ways if name in r["us"]}
            if forms:
                name = min(forms, key=forms.get)
                cases.append((f"vs {name}", forms[name] / r["us"]["ours"], DOWN_VS_SCALED_MM))
        out.append(verdict(f"FP8 down at M = 16 >= {DOWN_VS_SCALED_MM}x torch._scaled_mm {label}", cases, "x"))
    # where the chain picks another provider itself, "ours" is that provider timed a second time (through the layer),
    # and the peers are every other one, its small-M kernel included
    for label, own in (("its own small-M kernel", True), ("another provider", False)):
        cases = []
        for r in rows:
            best = best_other(r)
            if best is not None and r["picked"].startswith("small_m") == own:
                cases.append((f"{r['shape']} {r['kind']} M={r['M']} (picked {r['picked']}, best other {best[0]})",
                              best[1] / r["us"]["ours"], 1.0))
        out.append(verdict(f"GEMM never slower than the best other provider, where the chain picks {label}",
                           cases, "x", digits=3))
    return out


def mlp_targets(mlp: dict, baseline: dict | None = None) -> list[list[str]]:
    by_m = {r["M"]: r for r in mlp["rows"]}

    def cases(column, ms, bound):
        return [(f"{key} M={m}", v, bound) for m in ms if m in by_m for key, v in by_m[m][column].items()]

    out = [verdict(f"MLP graph >= {bound}x bf16 at {_ms(ms)}", cases("graph_vs_bf16", ms, bound), "x")
           for ms, bound in MLP_GRAPH]
    ms, bound = MLP_GRAPH_STRETCH
    out.append(verdict(f"MLP graph >= {bound}x bf16 at {_ms(ms)} (stretch)", cases("graph_vs_bf16", ms, bound), "x"))
    large = [(f"{key} M={m}", by_m[m]["graph_vs_bf16"][key], b) for m, keys in MLP_LARGE.items() if m in by_m
             for key, b in keys.items() if key in by_m[m]["graph_vs_bf16"]]
    out.append(verdict("MLP graph at M >= 1024 no worse than before (FP8 1.61 / 1.72, int8 1.58)", large, "x"))
    # the same baselines (taken from short replays) under a sustained load (``decode.sustained_turns``), where the
    # run timed one: bf16 slows more than the W8A8 keys there (560 -> 617 us at 1024 tokens on an H100, RESULTS.md,
    # forty-second round), which lifts every ratio
    sustained = [(f"{key} M={m}", by_m[m]["sustained_vs_bf16"][key], b) for m, keys in MLP_LARGE.items()
                 if m in by_m for key, b in keys.items() if key in by_m[m].get("sustained_vs_bf16", {})]
    if sustained:
        out.append(verdict("MLP sustained replay at M >= 1024 against the short replays' baselines", sustained, "x"))
    ms, bound = MLP_EAGER
    out.append(verdict(f"MLP eager >= {bound}x bf16 at {_ms(ms)}", cases("eager_vs_bf16", ms, bound), "x"))
    if baseline is None:
        sqnr = [(f"{key} M={m}", v, float("-inf")) for m, r in by_m.items() for key, v in r["sqnr_db"].items()]
        row = verdict("MLP SQNR against bf16", sqnr, " dB")
        out.append(row[:2] + ["—", "no baseline (--sqnr-baseline)" if sqnr else row[3]])
    else:
        target = f"MLP SQNR no more than {SQNR_DROP_DB} dB below the baseline's"
        # another model's (or width's) SQNR is no baseline: a file without the model's name is compared by d and h
        differ = [f"{what} {mlp.get(what)} / {baseline.get(what)}" for what in ("model", "d", "h")
                  if None not in (mlp.get(what), baseline.get(what)) and mlp.get(what) != baseline.get(what)]
        if differ:
            out.append([target, "—", "—", "not comparable (this run / the baseline): " + ", ".join(differ)])
            return out
        base = {(r["M"], key): v for r in baseline["rows"] for key, v in r["sqnr_db"].items()}
        out.append(verdict(target,
                           [(f"{key} M={m} (baseline {base[(m, key)]:.2f})", v, base[(m, key)] - SQNR_DROP_DB)
                            for m, r in by_m.items() for key, v in r["sqnr_db"].items() if (m, key) in base], " dB"))
    return out


def quickest_host(hosts: list[dict]) -> dict[str, dict[str, float]]:
    """Each key's call times at M = 1, the quickest of ``hosts`` (runs of ``bench host``) for each call."""
    out: dict[str, dict[str, float]] = {}
    for host in hosts:
        for key, calls in host["us_per_call"].items():
            for call, us in calls.items():
                if isinstance(us, (int, float)):
                    mine = out.setdefault(key, {})
                    mine[call] = min(us, mine.get(call, us))
    return out


def host_targets(hosts: list[dict]) -> list[list[str]]:
    quickest = quickest_host(hosts)
    turns = f" (quickest of {len(hosts)} runs)" if len(hosts) > 1 else ""
    out = []
    for what, prefix in (("QuantLinear", "QuantLinear("), ("producer", "producer ")):
        cases = [(f"{key} {call}", us, HOST_US) for key, calls in quickest.items() if key != "bf16"
                 for call, us in calls.items() if call.startswith(prefix)]
        out.append(verdict(f"host <= {HOST_US:g} us per {what} call at M = 1{turns}", cases, " us", higher=False,
                           digits=1))
    return out


def decode_targets(gemm: dict | None = None, mlp: dict | None = None, hosts: tuple[dict, ...] = (),
                   baseline: dict | None = None) -> list[str]:
    """The decode targets table for the runs given (each target: the measured range, the worst case, met or
    missed by how much), headed by the runs' device and model where they are not the ones the targets are set
    for."""
    runs = [r for r in (gemm, mlp, *hosts) if r is not None]
    out = []
    for run in runs:
        device, model = run.get("versions", {}).get("device", "?"), run.get("model", TARGET_MODEL)
        if (device, model) != (TARGET_DEVICE, TARGET_MODEL):
            out.append(f"(measured on {device} with {model}'s shapes; the targets are set for {TARGET_MODEL} "
                       f"on an {TARGET_DEVICE})\n")
            break
    table = (gemm_targets(gemm) if gemm else []) + (mlp_targets(mlp, baseline) if mlp else []) \
        + (host_targets(list(hosts)) if hosts else [])
    out += ["| target | measured | worst | status |", "|---|---|---|---|"]
    return out + ["| " + " | ".join(row) + " |" for row in table]


def gemm_table(gemm: dict) -> list[str]:
    """Per shape and kind: the chain's weight TB/s and its speed-up over the best other provider (``best_other``)
    at each M."""
    ms = sorted({r["M"] for r in gemm["rows"]})
    by = {(r["shape"], r["kind"], r["M"]): r for r in gemm["rows"]}
    out = ["| shape | kind | " + " | ".join(f"M={m}" for m in ms) + " |", "|---|---" + "|---" * len(ms) + "|"]
    for shape, kind in dict.fromkeys((r["shape"], r["kind"]) for r in gemm["rows"]):
        cells = []
        for m in ms:
            r = by.get((shape, kind, m))
            cells.append("—" if r is None else f"{r['weight_TBps']['ours']:.2f} TB/s, "
                         f"{_f(speedup_vs_best_other(r), 2)}x")
        out.append(f"| {shape} | {kind} | " + " | ".join(cells) + " |")
    return out


def mlp_table(mlp: dict) -> list[str]:
    """Per M: each key's graph and eager speed-up over bf16 and its SQNR, and its sustained replay's speed-up
    where the run timed one (a third figure, marked)."""
    keys = list(mlp["rows"][0]["graph_vs_bf16"]) if mlp["rows"] else []
    sustained = any("sustained_vs_bf16" in r for r in mlp["rows"])
    both = " [/ sustained]" if sustained else ""
    out = [f"| M | bf16 graph / eager{both} us | " + " | ".join(f"{k} graph / eager{both} x, SQNR dB" for k in keys)
           + " |", "|---|---" + "|---" * len(keys) + "|"]
    for r in mlp["rows"]:
        sus = r.get("sustained_vs_bf16", {})
        cells = [f"{r['graph_vs_bf16'][k]:.2f} / {r['eager_vs_bf16'][k]:.2f}"
                 + (f" / {sus[k]:.2f}" if k in sus else "") + f", {r['sqnr_db'][k]:.2f}" for k in keys]
        bf16 = f"{r['graph_us']['bf16']:.1f} / {r['eager_us']['bf16']:.1f}" + (
            f" / {r['sustained_us']['bf16']:.1f}" if "sustained_us" in r else "")
        out.append(f"| {r['M']} | {bf16} | " + " | ".join(cells) + " |")
    return out


# what the tables read of each kind of ``bench`` file: the document's keys, and every row's
_READS = {"act_quant": ({"ceiling_GBps", "versions"}, {"op"}),
          "gemm": ({"ceiling_GBps", "versions"}, {"shape", "kind", "M", "picked", "us", "weight_TBps", "pct_ceiling"}),
          "mlp": ({"versions"}, {"M", "graph_us", "eager_us", "graph_vs_bf16", "eager_vs_bf16", "sqnr_db"})}


def kind_of(doc: object) -> str | None:
    """Which ``bench`` file ``doc`` is: act_quant, gemm, mlp, host or legacy_mlp; None for none of them (another
    file's JSON, a sweep's table, or a bench file of a version older than the tables read)."""
    if not isinstance(doc, dict):
        return None
    if "us_per_call" in doc:
        return "host" if isinstance(doc["us_per_call"], dict) else None
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return None
    for kind, (keys, row_keys) in _READS.items():
        if keys <= doc.keys() and all(row_keys <= r.keys() for r in rows):
            return kind
    first = rows[0].get("us")
    return "legacy_mlp" if isinstance(first, dict) and "fused" in first else None


def _load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", help="JSON files that fused-quant bench wrote")
    parser.add_argument("--label", default="triton_fp8", help="the backend column of a first-version MLP file")
    parser.add_argument("--sqnr-baseline", help="an earlier mlp.json: the SQNR target compares against it")
    args = parser.parse_args(argv)
    docs: dict[str, list[dict]] = {}
    baseline = None
    for path, wanted in [(f, None) for f in args.files] + ([(args.sqnr_baseline, "mlp")] if args.sqnr_baseline else []):
        try:
            doc = _load(path)
        except (OSError, ValueError) as exc:
            print(f"report: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        kind = kind_of(doc)
        if kind is None or kind != (wanted or kind):
            print(f"report: {path} is not {'an ' + wanted if wanted else 'a'} file that fused-quant bench writes "
                  f"(its keys: {', '.join(doc) if isinstance(doc, dict) else type(doc).__name__})", file=sys.stderr)
            return 2
        if wanted:
            baseline = doc
        else:
            docs.setdefault(kind, []).append(doc)
    if baseline is not None and "mlp" not in docs:
        print("report: --sqnr-baseline compares an mlp file's SQNR with its own: give the mlp file among FILE",
              file=sys.stderr)
        return 2
    for kind in ("act_quant", "gemm", "mlp"):
        if len(docs.get(kind, ())) > 1:
            print(f"report: {len(docs[kind])} {kind} files given; one at a time (several host files are one "
                  "set: each call's quickest)", file=sys.stderr)
            return 2
    for act in docs.get("act_quant", ()):
        print(f"ceiling {act['ceiling_GBps']:.0f} GB/s; {act['versions']}\n")
        for table in (producer_table, targets_table, small_m_table):
            print("\n".join(table(act["rows"])) + "\n")
    for doc in docs.get("legacy_mlp", ()):
        print("\n".join(mlp_rows(doc, args.label)) + "\n")
    gemm, mlp = (docs[k][0] if k in docs else None for k in ("gemm", "mlp"))
    for doc, table in ((gemm, gemm_table), (mlp, mlp_table)):
        if doc is not None:
            print(f"{doc['versions']}\n" + "\n".join(table(doc)) + "\n")
    if gemm or mlp or "host" in docs:
        print("\n".join(decode_targets(gemm, mlp, tuple(docs.get("host", ())), baseline)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
