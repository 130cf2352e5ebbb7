"""Markdown tables for RESULTS.md from the JSON that ``fused-quant bench`` writes.

``python -m benchmarks.report benchmarks/results/act_quant.json [benchmarks/results/mlp.json [label]]``
prints the producer table, the targets table (M = 8192 / 32768), the small-M table (host work
included) and, given an MLP file, the MLP rows (``label`` names the backend column).
"""

from __future__ import annotations

import json
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
    rows = next(v for v in result.values() if isinstance(v, list))
    return [f"| {label} | {r['kind']} | {r['M']} | {r['us']['bf16']:.1f} | {r['us']['fused']:.1f} | "
            f"{r['us']['compiled_chain']:.1f} | {r['speedup_vs_bf16']:.2f}x | {r['speedup_vs_compiled_chain']:.2f}x |"
            for r in rows]


def _load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    act = _load(argv[0])
    print(f"ceiling {act['ceiling_GBps']:.0f} GB/s; {act['versions']}\n")
    for table in (producer_table, targets_table, small_m_table):
        print("\n".join(table(act["rows"])) + "\n")
    if len(argv) > 1:
        print("\n".join(mlp_rows(_load(argv[1]), argv[2] if len(argv) > 2 else "triton_fp8")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
