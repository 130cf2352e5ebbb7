"""Markdown tables for RESULTS.md from the JSON that ``fused-quant bench`` writes, and the decode targets.

``python -m benchmarks.report FILE... [--label NAME] [--sqnr-baseline MLP_JSON]`` reads each file by what it holds:

- ``act_quant.json``: the producer table, the targets table (M = 8192 / 32768) and the small-M table (host work
  included);
- ``gemm.json``, ``mlp.json``, ``host.json`` (several host files: each call's quickest of them), of one device,
  tree and setup (``mixed_runs``; files that differ are refused): their tables and the decode targets
  (``decode_targets``: each target, the measured range, the worst case and by how much it is met or missed);
  ``--sqnr-baseline`` an earlier ``mlp.json`` whose SQNR the run's must stay within 0.1 dB of;
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


def ratio(a: float, b: float) -> float:
    """a / b over two times: NaN where either is NaN, inf where either is zero or less (a timing that failed), which
    the verdicts tell as not measured, whichever side it is on."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a / b if a > 0 and b > 0 else math.inf


def _quickest(times: dict[str, float]) -> str:
    """The name of the least of ``times``; a NaN's where there is one (a timing that failed), whatever the order."""
    return min(times, key=lambda name: (not math.isnan(times[name]), times[name]))


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
        status = ""
        if has_target:
            measured = all(map(math.isfinite, (pa, pb, sa, sb)))
            met = measured and min(pa, pb) >= pct and min(sa, sb) >= speed
            status = "**met**" if met else "missed" if measured else "not measured: a value is NaN, infinite or a zero time"
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
        vs = _f(ratio(us["compiled_loop"], us["ours_loop"]), 2) + "x" if "compiled_loop" in us else "—"
        out.append(f"| {r['op']} | {r['M']} | {_f(us['ours_loop'])} | {_f(us.get('ours_op_loop'))} | "
                   f"{_f(us.get('bare_triton_loop'))} | {_f(us.get('compiled_loop'))} | {vs} | "
                   f"{_f(us.get('ours_graph'))} | {_f(us.get('compiled_graph'))} |")
    return out


def mlp_rows(result: dict, label: str) -> list[str]:
    """The rows of an MLP file of the first ``bench`` version (one time per provider and M), under their header."""
    return ["| backend | kind | M | bf16 us | fused us | compiled chain us | vs bf16 | vs compiled chain |",
            "|---|---|---|---|---|---|---|---|"] + [f"| {label} | {r['kind']} | {r['M']} | {r['us']['bf16']:.1f} | {r['us']['fused']:.1f} | "
            f"{r['us']['compiled_chain']:.1f} | {r['speedup_vs_bf16']:.2f}x | {r['speedup_vs_compiled_chain']:.2f}x |"
            for r in result["rows"]]


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
HOST_PROVIDERS = "providers"  # beside each key's call times in a host file: the providers its layers picked
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
    name = _quickest(others)
    return name, others[name]


def speedup_vs_best_other(row: dict) -> float | None:
    """``best_other``'s time / the chain's: over 1 where the chain's pick is the quicker."""
    best = best_other(row)
    return None if best is None else ratio(best[1], row["us"]["ours"])


def _ms(ms: tuple[int, ...]) -> str:
    return f"M = {ms[0]}-{ms[-1]}" if len(ms) > 2 else "M = " + " / ".join(map(str, ms))


def verdict(target: str, cases: list[tuple[str, float, float]], unit: str = "", higher: bool = True,
            digits: int = 2) -> list[str]:
    """One row of the targets table: ``cases`` are (where, measured, bound); the worst case is the one whose
    measured value is furthest on the wrong side of (or least over) its bound."""
    if not cases:
        return [target, "—", "—", "not in these files"]
    # a timing that failed (NaN), a ratio over a zero time (inf), a time of zero or less (where lower is better: the
    # values are times) or a bound that is no number (a baseline's NaN): no verdict on it
    broken = [(where, v) for where, v, bound in cases
              if not math.isfinite(v) or math.isnan(bound) or (not higher and v <= 0)]
    if broken:
        return [target, "—", f"{broken[0][0]}: {broken[0][1]}", "not measured: a value is NaN, infinite or a zero time"]
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

    out = []
    # back to back (each call may start while the one before it ends: PDL), then, where the run timed it, each call
    # after another library's kernel, as in a decoder
    for field, how in (("", ""), ("_after_foreign", ", after a foreign kernel")):
        if not all(f"weight_TBps{field}" in r for r in rows):
            continue
        out += [verdict(f"GEMM weights >= {GEMM_TBPS_FEW} TB/s at {_ms(GEMM_FEW_M)}{how}",
                        [(w, v, GEMM_TBPS_FEW) for w, v in at(GEMM_FEW_M, f"weight_TBps{field}")], " TB/s"),
                verdict(f"GEMM >= {GEMM_PCT_FEW:g}% of the copy ceiling at {_ms(GEMM_FEW_M)}{how}",
                        [(w, v, GEMM_PCT_FEW) for w, v in at(GEMM_FEW_M, f"pct_ceiling{field}")], "%", digits=1),
                verdict(f"GEMM weights >= {GEMM_TBPS_64} TB/s at M = 64{how}",
                        [(w, v, GEMM_TBPS_64) for w, v in at((64,), f"weight_TBps{field}")], " TB/s")]
    down = [r for r in rows if r["shape"] == "down" and r["kind"] == "fp8" and r["M"] == 16]
    for label, ways in (("with its own scaling", (SCALED_MM_OWN,)), ("in its quickest way", SCALED_MM_WAYS)):
        cases = []
        for r in down:
            forms = {name: r["us"][name] for name in ways if name in r["us"]}
            if forms:
                name = _quickest(forms)
                cases.append((f"vs {name}", ratio(forms[name], r["us"]["ours"]), DOWN_VS_SCALED_MM))
        out.append(verdict(f"FP8 down at M = 16 >= {DOWN_VS_SCALED_MM}x torch._scaled_mm {label}", cases, "x"))
    # where the chain picks another provider itself, "ours" is that provider timed a second time (through the layer),
    # and the peers are every other one, its small-M kernel included
    for label, own in (("its own small-M kernel", True), ("another provider", False)):
        cases = []
        for r in rows:
            best = best_other(r)
            if best is not None and r["picked"].startswith("small_m") == own:
                cases.append((f"{r['shape']} {r['kind']} M={r['M']} (picked {r['picked']}, best other {best[0]})",
                              ratio(best[1], r["us"]["ours"]), 1.0))
        out.append(verdict(f"GEMM never slower than the best other provider, where the chain picks {label}",
                           cases, "x", digits=3))
    return out


def mlp_targets(mlp: dict, baseline: dict | None = None) -> list[list[str]]:
    by_m = {r["M"]: r for r in mlp["rows"]}

    def cases(column, ms, bound):
        return [(f"{key} M={m}", v, bound) for m in ms if m in by_m for key, v in by_m[m][column].items()]

    out = [verdict(f"MLP graph >= {bound}x bf16 at {_ms(ms)}", cases("graph_vs_bf16", ms, bound), "x")
           for ms, bound in MLP_GRAPH]
    if all("graph_after_foreign_vs_bf16" in r for r in mlp["rows"]):  # each call after another library's kernel
        out += [verdict(f"MLP graph >= {bound}x bf16 at {_ms(ms)}, after a foreign kernel",
                        cases("graph_after_foreign_vs_bf16", ms, bound), "x") for ms, bound in MLP_GRAPH]
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
        told = not sqnr or row[3].startswith("not measured")  # no rows, or a NaN: said as the verdict says it
        out.append(row if told else row[:2] + ["—", "no baseline (--sqnr-baseline)"])
    else:
        target = f"MLP SQNR no more than {SQNR_DROP_DB} dB below the baseline's"
        # another model's (or width's) SQNR is no baseline: a file without the model's name is compared by d and h
        differ = [f"{what} {mlp.get(what)} / {baseline.get(what)}" for what in ("model", "d", "h")
                  if None not in (mlp.get(what), baseline.get(what)) and mlp.get(what) != baseline.get(what)]
        if differ:
            out.append([target, "—", "—", "not comparable (this run / the baseline): " + ", ".join(differ)])
            return out
        base = {(r["M"], key): v for r in baseline["rows"] for key, v in r["sqnr_db"].items()}
        cases = [(f"{key} M={m} (baseline {base[(m, key)]:.2f})", v, base[(m, key)] - SQNR_DROP_DB)
                 for m, r in by_m.items() for key, v in r["sqnr_db"].items() if (m, key) in base]
        row = verdict(target, cases, " dB")
        if not cases and any(r["sqnr_db"] for r in mlp["rows"]):
            row[3] = "not in the baseline: no token count and key in common with this run"
        out.append(row)
    return out


def quickest_host(hosts: list[dict]) -> dict[str, dict[str, float]]:
    """Each key's call times at M = 1, the quickest of ``hosts`` (runs of ``bench host``) for each call (NaN where
    a run's timing of it failed: no verdict then, whatever the order of the runs)."""
    out: dict[str, dict[str, float]] = {}
    for host in hosts:
        for key, calls in host["us_per_call"].items():
            for call, us in calls.items():
                if call != HOST_PROVIDERS:
                    mine = out.setdefault(key, {})
                    before = mine.get(call, us)
                    mine[call] = math.nan if math.isnan(before) or math.isnan(us) else min(before, us)
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


# what the files of one decode table must agree on where each of them records it (besides the model's shapes): a
# table over two devices, trees or setups would be no one run's measurement
SAME_RUN = ("device", "fused_quant", "tree", "torch", "triton", "cuda", "python", "backend", "env")


def mixed_runs(named: list[tuple[str, dict]]) -> str:
    """'' where the (path, file) pairs agree on the model and on each of ``SAME_RUN`` (a field a file does not
    record, an older bench's, is not compared), else the first field that differs and which file has which."""
    for field in ("model", *SAME_RUN):
        seen: dict[str, list[str]] = {}
        for path, doc in named:
            value = doc.get("model", TARGET_MODEL) if field == "model" else doc.get("versions", {}).get(field)
            if value is not None:
                seen.setdefault(json.dumps(value, sort_keys=True), []).append(path)
        if len(seen) > 1:
            return f"the files differ in {field}: " + "; ".join(f"{value} in {', '.join(paths)}"
                                                               for value, paths in seen.items())
    return ""


def decode_targets(gemm: dict | None = None, mlp: dict | None = None, hosts: tuple[dict, ...] = (),
                   baseline: dict | None = None) -> list[str]:
    """The decode targets table for the runs given (each target: the measured range, the worst case, met or
    missed by how much), headed by the runs' device and model where they are not the ones the targets are set
    for."""
    runs = [r for r in (gemm, mlp, *hosts) if r is not None]
    out = []
    if runs:  # one run's files (``mixed_runs``): the first says for all
        device, model = runs[0].get("versions", {}).get("device", "?"), runs[0].get("model", TARGET_MODEL)
        if (device, model) != (TARGET_DEVICE, TARGET_MODEL):
            out.append(f"(measured on {device} with {model}'s shapes; the targets are set for {TARGET_MODEL} "
                       f"on an {TARGET_DEVICE})\n")
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
            speedup = None if r is None else speedup_vs_best_other(r)
            cells.append("—" if r is None else f"{r['weight_TBps']['ours']:.2f} TB/s, "
                         + ("no other provider" if speedup is None else f"{speedup:.2f}x"))
        out.append(f"| {shape} | {kind} | " + " | ".join(cells) + " |")
    return out


def mlp_table(mlp: dict) -> list[str]:
    """Per M: each key's graph and eager speed-up over bf16 and its SQNR, and its sustained replay's speed-up
    where the run timed one (a third figure, marked); a key a row did not time is a dash there."""
    keys = list(dict.fromkeys(k for r in mlp["rows"] for k in r["graph_vs_bf16"]))
    sustained = any("sustained_vs_bf16" in r for r in mlp["rows"])
    both = " [/ sustained]" if sustained else ""
    out = [f"| M | bf16 graph / eager{both} us | " + " | ".join(f"{k} graph / eager{both} x, SQNR dB" for k in keys)
           + " |", "|---|---" + "|---" * len(keys) + "|"]
    for r in mlp["rows"]:
        sus = r.get("sustained_vs_bf16", {})
        cells = [f"{_f(r['graph_vs_bf16'].get(k), 2)} / {_f(r['eager_vs_bf16'].get(k), 2)}"
                 + (f" / {sus[k]:.2f}" if k in sus else "") + f", {_f(r['sqnr_db'].get(k), 2)}" for k in keys]
        bf16 = f"{r['graph_us']['bf16']:.1f} / {r['eager_us']['bf16']:.1f}" + (
            f" / {r['sustained_us']['bf16']:.1f}" if "sustained_us" in r else "")
        out.append(f"| {r['M']} | {bf16} | " + " | ".join(cells) + " |")
    return out


# What the tables read of each kind of ``bench`` file: the document's fields, and every row's; each field's value is
# a number, a whole number, a text, a mapping, or a mapping of names to numbers holding the names given. Optional
# fields are checked where a file has them.
NUMBER, WHOLE, TEXT, MAPPING = "a number", "a whole number", "a text", "a mapping"


def _numbers(*names: str) -> tuple[str, ...]:
    return ("numbers",) + names


_READS = {
    "act_quant": ({"ceiling_GBps": NUMBER, "versions": MAPPING},
                  {"op": TEXT, "M": WHOLE, "us": _numbers(), "GBps": _numbers("ours"),
                   "pct_ceiling": _numbers("ours"), "speedup_vs": _numbers("compiled")}, {}),
    "gemm": ({"ceiling_GBps": NUMBER, "versions": MAPPING},
             {"shape": TEXT, "kind": TEXT, "M": WHOLE, "picked": TEXT, "us": _numbers("ours"),
              "weight_TBps": _numbers("ours"), "pct_ceiling": _numbers("ours")},
             {"us_after_foreign": _numbers("ours"), "weight_TBps_after_foreign": _numbers("ours"),
              "pct_ceiling_after_foreign": _numbers("ours")}),
    "mlp": ({"versions": MAPPING},
            {"M": WHOLE, "graph_us": _numbers("bf16"), "eager_us": _numbers("bf16"), "graph_vs_bf16": _numbers(),
             "eager_vs_bf16": _numbers(), "sqnr_db": _numbers()},
            {"sustained_us": _numbers("bf16"), "sustained_vs_bf16": _numbers(),
             "graph_after_foreign_us": _numbers("bf16"), "graph_after_foreign_vs_bf16": _numbers()}),
    "legacy_mlp": ({}, {"kind": TEXT, "M": WHOLE, "us": _numbers("bf16", "fused", "compiled_chain"),
                        "speedup_vs_bf16": NUMBER, "speedup_vs_compiled_chain": NUMBER}, {}),
}


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(value: object) -> str:
    text = json.dumps(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _wrong(where: str, value: object, want) -> str | None:
    """What is wrong with ``value`` as ``want`` (one of the kinds above), or None."""
    if want == NUMBER:
        ok = _is_number(value)
    elif want == WHOLE:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif want == TEXT:
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, dict)
    if not ok:
        return f"{where} is {_shown(value)}, not {MAPPING if isinstance(want, tuple) else want}"
    if isinstance(want, tuple):
        for name, v in value.items():
            if not _is_number(v):
                return f"{where}[{name!r}] is {_shown(v)}, not a number"
        missing = [name for name in want[1:] if name not in value]
        if missing:
            return f"{where} lacks {', '.join(map(repr, missing))}"
    return None


def _fields_wrong(where: str, doc: dict, needed: dict, optional: dict | None = None) -> str | None:
    """What is wrong with the fields of ``doc`` (the file's own where ``where`` is empty, else a row's)."""
    missing = [name for name in needed if name not in doc]
    if missing:
        return f"{where or 'the file'} lacks {', '.join(map(repr, missing))}"
    for name, want in (needed | {k: v for k, v in (optional or {}).items() if k in doc}).items():
        wrong = _wrong(f"{where}[{name!r}]" if where else repr(name), doc[name], want)
        if wrong:
            return wrong
    return None


def _host_wrong(doc: dict) -> str | None:
    calls = doc["us_per_call"]
    if not isinstance(calls, dict):
        return _wrong("us_per_call", calls, MAPPING)
    for key, times in calls.items():
        where = f"us_per_call[{key!r}]"
        if not isinstance(times, dict):
            return _wrong(where, times, MAPPING)
        wrong = _wrong(where, {call: us for call, us in times.items() if call != HOST_PROVIDERS}, _numbers())
        if wrong:
            return wrong
    return _fields_wrong("", doc, {}, {"versions": MAPPING})


def sort_out(doc: object) -> tuple[str | None, str | None]:
    """Which ``bench`` file ``doc`` looks like (act_quant, gemm, mlp, host, legacy_mlp; None for none of them: another
    file's JSON, a sweep's table), and what in it the tables cannot read (None where they read all of it)."""
    if not isinstance(doc, dict):
        return None, None
    if "us_per_call" in doc:
        return "host", _host_wrong(doc)
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict):
        return None, None
    first = rows[0]
    if "ceiling_GBps" in doc and "op" in first:
        kind = "act_quant"
    elif "ceiling_GBps" in doc and "shape" in first:
        kind = "gemm"
    elif "graph_vs_bf16" in first or "graph_us" in first:
        kind = "mlp"
    elif isinstance(first.get("us"), dict) and "fused" in first["us"]:
        kind = "legacy_mlp"
    else:
        return None, None
    needed, row_needs, row_may = _READS[kind]
    wrong = _fields_wrong("", doc, needed)
    for i, row in enumerate(rows):
        where = f"rows[{i}]"
        wrong = wrong or _wrong(where, row, MAPPING) or _fields_wrong(where, row, row_needs, row_may)
    return kind, wrong


def kind_of(doc: object) -> str | None:
    """Which ``bench`` file ``doc`` is (``sort_out``), None for none of them or one whose tables cannot be read of
    it (a bench file of a version older than the tables read)."""
    kind, wrong = sort_out(doc)
    return None if wrong else kind


def _load(path: str) -> object:
    with open(path) as f:
        return json.load(f)


_A_FILE = {"act_quant": "an act_quant", "gemm": "a gemm", "mlp": "an mlp", "host": "a host",
           "legacy_mlp": "a first-version mlp"}


def _what_it_holds(doc: object) -> str:
    if not isinstance(doc, dict):
        return f"it holds {_shown(doc)}"
    if not doc:
        return "it is an empty mapping"
    if doc.get("rows") == []:
        return "its rows are empty"
    return f"its keys: {', '.join(doc)}"


def main(argv: list[str]) -> int:
    """The command: its exit status (2 for a file it cannot read), its output's failures told as
    ``fused-quant``'s are."""
    from fused_quant.flags import run_guarded

    return run_guarded(lambda: _report(argv), lambda: "report")


def _report(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", help="JSON files that fused-quant bench wrote")
    parser.add_argument("--label", default="triton_fp8", help="the backend column of a first-version MLP file")
    parser.add_argument("--sqnr-baseline", help="an earlier mlp.json: the SQNR target compares against it")
    args = parser.parse_args(argv)
    docs: dict[str, list[dict]] = {}
    decode_files: list[tuple[str, dict]] = []  # the files one decode targets table is read from
    baseline = None
    for path, wanted in [(f, None) for f in args.files] + ([(args.sqnr_baseline, "mlp")] if args.sqnr_baseline else []):
        try:
            doc = _load(path)
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested past Python's stack
            print(f"report: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        kind, wrong = sort_out(doc)
        if kind is None or kind != (wanted or kind):
            print(f"report: {path} is not {'an ' + wanted if wanted else 'a'} file that fused-quant bench writes "
                  f"({_what_it_holds(doc)})", file=sys.stderr)
            return 2
        if wrong:
            print(f"report: {path} is {_A_FILE[kind]} file the tables cannot read "
                  f"(one of an older bench version?): {wrong}", file=sys.stderr)
            return 2
        if wanted:
            baseline = doc
        else:
            docs.setdefault(kind, []).append(doc)
            if kind in ("gemm", "mlp", "host"):
                decode_files.append((path, doc))
    if baseline is not None and "mlp" not in docs:
        print("report: --sqnr-baseline compares an mlp file's SQNR with its own: give the mlp file among FILE",
              file=sys.stderr)
        return 2
    for kind in ("act_quant", "gemm", "mlp"):
        if len(docs.get(kind, ())) > 1:
            print(f"report: {len(docs[kind])} {kind} files given; one at a time (several host files are one "
                  "set: each call's quickest)", file=sys.stderr)
            return 2
    mixed = mixed_runs(decode_files)
    if mixed:
        print(f"report: one decode table is one run's files; {mixed}", file=sys.stderr)
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
