"""benchmarks/report.py: the tables and the decode targets from the JSON that ``fused-quant bench`` writes (CPU:
files recorded on an H200 and made-up ones)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import report
from fused_quant import cli
from tests.cli_fixtures import ROUND31, record_benchmarks

ROOT = Path(report.__file__).resolve().parent.parent


def _doc(name: str) -> dict:
    return json.loads((ROUND31 / name).read_text())


# a producer row of ``bench act_quant`` (one token, an H200's times)
_ACT_ROW = {"op": "silu_mul -> fp8 per-token", "M": 1, "us": {"ours": 7.5, "compiled": 47.5}, "GBps": {"ours": 9.1},
            "pct_ceiling": {"ours": 0.2}, "speedup_vs": {"compiled": 6.3}}


def _row(table: list[str], target: str) -> list[str]:
    """The cells of the targets table's row whose target starts with ``target``."""
    (line,) = [line for line in table if line.startswith(f"| {target}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_verdict_takes_the_worst_case_and_says_by_how_much():
    cases = [("a", 3.7, 3.6), ("b", 3.1, 3.6), ("c", 3.5, 3.6)]
    assert report.verdict("t", cases, " TB/s") == ["t", "3.10-3.70 TB/s", "b: 3.10 TB/s", "missed by 0.50 TB/s"]
    assert report.verdict("t", [("a", 3.6, 3.6)], " TB/s")[3] == "**met**"  # at the bound is met
    # lower is better: the case furthest over its bound, each case with its own bound
    host = [("x", 13.0, 12.0), ("y", 11.0, 12.0), ("z", 15.0, 14.5)]
    assert report.verdict("h", host, " us", higher=False, digits=1)[2:] == ["x: 13.0 us", "missed by 1.0 us"]
    assert report.verdict("h", [], " us") == ["h", "—", "—", "not in these files"]
    # a miss smaller than the table's digits is written with the digits that show it, the worst value with them
    near = [("a", 1.65, 1.6), ("b", 1.5988, 1.6)]
    assert report.verdict("g", near, "x") == ["g", "1.599-1.650x", "b: 1.599x", "missed by 0.001x"]
    assert report.verdict("g", [("a", 1.59999996, 1.6)], "x")[2:] == ["a: 1.600000x", "missed by < 0.000001x"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_verdict_gives_no_verdict_on_a_value_that_is_not_finite(bad):
    row = report.verdict("t", [("a", 4.0, 3.6), ("b", bad, 3.6)], " TB/s")
    assert row[3] == "not measured: a value is NaN, infinite or a zero time" and row[2] == f"b: {bad}"


def test_targets_of_the_h200_run():
    """The thirty-first round's H200 files (run 2, three host runs): the figures benchmarks/RESULTS.md gives."""
    table = report.decode_targets(_doc("run2_gemm.json"), _doc("run2_mlp.json"),
                                  tuple(_doc(f"run2_host{i}.json") for i in (1, 2, 3)), _doc("run3_mlp.json"))
    assert not table[0].startswith("(measured on")  # the targets' own device and model: no caveat
    assert _row(table, "MLP graph >= 1.9x")[1:] == ["1.92-2.10x", "fp8_token M=16: 1.92x", "**met**"]
    assert _row(table, "MLP graph >= 1.7x")[3] == "**met**" and _row(table, "MLP graph >= 1.6x")[3] == "**met**"
    assert _row(table, "MLP graph >= 2.2x")[3] == "missed by 0.28x"
    assert _row(table, "MLP graph at M >= 1024")[2:] == ["int8_token M=1024: 1.61x", "**met**"]
    assert _row(table, "MLP eager")[2:] == ["int8_token M=1: 1.28x", "missed by 0.02x"]
    # the baseline: run 3 (M = 1 / 16 / 64, on an H100), a file other than the run's, which read the same dB there
    assert _row(table, "MLP SQNR")[2:] == ["fp8_token M=1 (baseline 23.93): 23.93 dB", "**met**"]
    assert _row(table, "GEMM weights >= 3.6")[2:] == ["o fp8 M=16: 2.08 TB/s", "missed by 1.52 TB/s"]
    own_scaling = _row(table, "FP8 down at M = 16 >= 1.4x torch._scaled_mm with its own scaling")
    assert own_scaling[1:] == ["1.97x", "vs scaled_mm (row-wise): 1.97x", "**met**"]
    # its fp32 product with our epilogue is the quicker way to run torch._scaled_mm there
    quickest = _row(table, "FP8 down at M = 16 >= 1.4x torch._scaled_mm in its quickest way")
    assert quickest[1:] == ["1.20x", "vs scaled_mm (fp32 + epilogue): 1.20x", "missed by 0.20x"]
    own = _row(table, "GEMM never slower than the best other provider, where the chain picks its own small-M kernel")
    assert own[1:] == ["1.020-2.406x", "gate_up fp8 M=8 (picked small_m_fp8, best other scaled_mm (fp32 + epilogue)): "
                       "1.020x", "**met**"]
    other_pick = _row(table, "GEMM never slower than the best other provider, where the chain picks another provider")
    # the worst of them: the small-M kernel, which the chain did not pick there, 2.3% quicker than its pick
    assert other_pick[2:] == ["down fp8 M=64 (picked scaled_mm_fp8 (fp32 + epilogue), best other small_m): 0.977x",
                              "missed by 0.023x"]
    quantlinear, producer = _row(table, "host <= 12 us per QuantLinear"), _row(table, "host <= 12 us per producer")
    assert quantlinear[0].endswith("(quickest of 3 runs)")
    assert (quantlinear[1], quantlinear[3]) == ("13.7-15.0 us", "missed by 3.0 us")
    assert (producer[1], producer[3]) == ("14.4-16.0 us", "missed by 4.0 us")


def _gemm_row(picked: str, **us: float) -> dict:
    return {"shape": "down", "kind": "fp8", "M": 64, "picked": picked, "us": us, "weight_TBps": {"ours": 2.0},
            "pct_ceiling": {"ours": 50.0}}


def test_best_other_never_compares_the_pick_with_itself_and_counts_the_small_m_kernel():
    """Where the chain picks a torch provider, its column in the row is the same kernel as ``ours``: the peer is the
    quickest of the others, the small-M kernel among them; where it picks its own kernel, ``small_m`` is it."""
    fp32 = "scaled_mm (fp32 + epilogue)"
    row = _gemm_row("scaled_mm_fp8 (fp32 + epilogue)", ours=30.0, small_m=20.0, bf16=10.0,
                    **{fp32: 29.0, "scaled_mm (row-wise)": 40.0})
    assert report.best_other(row) == ("small_m", 20.0)  # not its own column (29.0), not bf16's other problem
    assert report.speedup_vs_best_other(row) == pytest.approx(20.0 / 30.0)
    table = report.decode_targets({"rows": [row]})
    assert _row(table, "GEMM never slower than the best other provider, where the chain picks another")[2:] == [
        "down fp8 M=64 (picked scaled_mm_fp8 (fp32 + epilogue), best other small_m): 0.667x", "missed by 0.333x"]
    own = _gemm_row("small_m_int8", ours=10.0, small_m=9.0, triton_int8=12.0, int_mm=11.0)
    assert report.best_other(own) == ("int_mm", 11.0)
    triton = _gemm_row("triton_int8", ours=10.0, small_m=10.5, triton_int8=9.0)
    assert report.best_other(triton) == ("small_m", 10.5)
    assert report.best_other(_gemm_row("small_m_int8", ours=10.0, small_m=9.0)) is None
    assert _row(report.decode_targets({"rows": [own]}), "GEMM never slower than the best other provider, where the "
                "chain picks another")[1:] == ["—", "—", "not in these files"]


def test_quickest_host_takes_each_calls_minimum_and_skips_what_is_not_a_time():
    runs = [_doc(f"run2_host{i}.json") for i in (1, 2, 3)]
    quickest = report.quickest_host(runs)
    for key, calls in quickest.items():
        for call, us in calls.items():
            assert us == min(run["us_per_call"][key][call] for run in runs)
    assert "providers" not in quickest["fp8_static"]  # the provider names beside the times


def test_sqnr_below_the_baseline_by_more_than_a_tenth_of_a_db_misses():
    mlp, base = _doc("run2_mlp.json"), _doc("run2_mlp.json")
    mlp["rows"][2]["sqnr_db"]["int8_token"] -= 0.11
    row = _row(report.decode_targets(None, mlp, (), base), "MLP SQNR")
    assert row[2].startswith("int8_token M=64 (baseline 29.90)") and row[3] == "missed by 0.01 dB"
    no_base = _row(report.decode_targets(None, mlp), "MLP SQNR against bf16")
    assert no_base[2:] == ["—", "no baseline (--sqnr-baseline)"]


@pytest.mark.parametrize("field, value, said", [("d", 64, "d 4096 / 64"), ("h", 512, "h 14336 / 512"),
                                                 ("model", "Qwen-7B", "model Llama-3-8B / Qwen-7B")])
def test_sqnr_baseline_of_another_model_or_width_is_not_compared(field, value, said):
    """The baseline's SQNR is another problem's where its model or widths differ: no verdict on it, whatever its
    figures (here the run's own); a baseline that does not name its model (the thirty-first round's) is compared by
    its widths."""
    mlp, base = _doc("run2_mlp.json"), _doc("run2_mlp.json")
    mlp["model"] = "Llama-3-8B"
    base[field] = value
    row = _row(report.decode_targets(None, mlp, (), base), "MLP SQNR")
    assert row[1:] == ["—", "—", f"not comparable (this run / the baseline): {said}"]
    assert "model" not in _doc("run2_mlp.json")
    assert _row(report.decode_targets(None, mlp, (), _doc("run2_mlp.json")), "MLP SQNR")[3] == "**met**"


def test_sqnr_inputs_of_some_token_counts_are_those_of_a_full_run():
    """``mlp_sqnr`` draws each M's input from one generator: a run of some token counts draws the full list's inputs
    before each of them, in the full list's order, so its SQNR compares with a full run's at the same M."""
    from benchmarks import decode

    assert decode.draw_order(decode.MLP_MS) == list(decode.MLP_MS)
    assert decode.draw_order((1024, 16)) == [1, 16, 64, 256, 1024]
    assert decode.draw_order((64,)) == [1, 16, 64]
    assert decode.draw_order((1, 3, 16)) == [1, 16, 3]  # counts outside the list after it
    assert decode.draw_order((3,)) == [3]


def test_a_run_without_the_targets_token_counts_says_so():
    gemm, mlp = _doc("run2_gemm.json"), _doc("run2_mlp.json")
    gemm["rows"] = [r for r in gemm["rows"] if r["M"] == 1]  # bench gemm --m 1
    mlp["rows"] = [r for r in mlp["rows"] if r["M"] == 1]
    table = report.decode_targets(gemm, mlp)
    assert _row(table, "GEMM weights >= 3.0 TB/s at M = 64")[3] == "not in these files"
    for way in ("with its own scaling", "in its quickest way"):
        assert _row(table, f"FP8 down at M = 16 >= 1.4x torch._scaled_mm {way}")[3] == "not in these files"
    assert _row(table, "MLP graph >= 1.7x")[3] == "not in these files"
    assert _row(table, "MLP graph >= 1.9x")[1] == "2.00-2.10x"  # M = 1 alone
    assert not any("host" in line for line in table)  # no host file given: no host rows


def test_another_device_or_model_heads_the_table_with_it():
    gemm = _doc("run2_gemm.json")
    gemm["versions"]["device"] = "NVIDIA H100 80GB HBM3"
    assert report.decode_targets(gemm)[0].startswith("(measured on NVIDIA H100 80GB HBM3 with Llama-3-8B's shapes;")
    mlp = _doc("run2_mlp.json") | {"model": "qwen2-7b (tp=2)"}
    assert "with qwen2-7b (tp=2)'s shapes" in report.decode_targets(None, mlp)[0]


def test_kind_of_reads_each_bench_file_and_nothing_else():
    assert [report.kind_of(_doc(n)) for n in ("run2_gemm.json", "run2_mlp.json", "run2_host1.json")] == \
        ["gemm", "mlp", "host"]
    act = {"ceiling_GBps": 4270.0, "versions": {}, "rows": [_ACT_ROW]}
    assert report.kind_of(act) == "act_quant"
    assert report.kind_of({"rows": act["rows"]}) is None  # no ceiling to print
    legacy = {"kind": "fp8", "M": 16, "us": {"bf16": 2, "fused": 1, "compiled_chain": 1.5}, "speedup_vs_bf16": 2,
              "speedup_vs_compiled_chain": 1.5}
    assert report.kind_of({"rows": [legacy]}) == "legacy_mlp"
    for other in ([], {}, {"rows": []}, {"rows": [1]}, {"rows": [{"M": 1}]}, "text"):
        assert report.kind_of(other) is None


def test_report_command_prints_the_tables_and_the_targets(capsys):
    files = [str(ROUND31 / n) for n in ("run2_gemm.json", "run2_mlp.json", "run2_host1.json", "run2_host2.json")]
    assert report.main(files + ["--sqnr-baseline", files[1]]) == 0
    out = capsys.readouterr().out
    assert "| down | int8 | 3.63 TB/s, 2.41x |" in out  # the GEMM table
    assert "| 1 | 99.9 / 94.6 | 2.10 / 1.97, 24.01 |" in out  # the MLP table
    assert "(quickest of 2 runs)" in out and "| MLP SQNR no more than 0.1 dB below the baseline's |" in out


def test_report_refuses_what_it_cannot_read(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"answer": 42}))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    gemm = str(ROUND31 / "run2_gemm.json")
    for argv, message in (([str(other)], "is not a file that fused-quant bench writes (its keys: answer)"),
                          ([str(broken)], "cannot read"), ([str(tmp_path / "none.json")], "cannot read"),
                          ([gemm, gemm], "2 gemm files given"),
                          ([gemm, "--sqnr-baseline", gemm], "is not an mlp file"),
                          ([gemm, "--sqnr-baseline", str(ROUND31 / "run2_mlp.json")],
                           "--sqnr-baseline compares an mlp file's SQNR with its own")):
        assert report.main(argv) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("name", ["small_m_gemm_configs.json", "small_m_quantizing_configs.json"])
def test_report_refuses_a_sweeps_table(name, capsys):
    """A sweep's table has rows with some of a bench file's keys (shape, weight_TBps): refused by name, where the
    tables read what it lacks (a traceback before)."""
    from pathlib import Path

    table = Path(report.__file__).resolve().parent.parent / "fused_quant" / "kernels" / name
    assert report.main([str(table)]) == 2
    assert "is not a file that fused-quant bench writes" in capsys.readouterr().err


def test_bench_prints_the_targets_of_what_it_ran_last(tmp_path, monkeypatch, capsys):
    record_benchmarks(monkeypatch)  # the decode benchmarks answer with the H200's recorded files
    assert cli.main(["bench", "mlp", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    tail = out[out.index("decode targets"):]
    assert "| MLP eager >= 1.3x bf16 at M = 1 / 16 | 1.28-2.02x |" in tail
    assert "GEMM" not in tail and "host" not in tail  # only what this run measured
    assert cli.main(["bench", "act_quant", "--out", str(tmp_path / "b")]) == 0
    assert "decode targets" not in capsys.readouterr().out  # the producers' run has none


def test_sustained_replays_get_a_row_of_their_own_and_a_third_figure_in_the_table():
    """An MLP file with sustained replays (``bench mlp`` from 1024 tokens on): their row against the baselines of
    the graph line, and each cell's third figure; a file without them shows neither."""
    mlp = _doc("run2_mlp.json")
    assert not any(line.startswith("| MLP sustained") for line in report.decode_targets(None, mlp))
    assert report.mlp_table(mlp)[0].startswith("| M | bf16 graph / eager us |")
    big = next(r for r in mlp["rows"] if r["M"] == 1024)
    big["sustained_us"] = {"bf16": 600.0, "fp8_static": 340.0, "fp8_token": 350.0, "int8_token": 400.0}
    big["sustained_vs_bf16"] = {k: 600.0 / v for k, v in big["sustained_us"].items() if k != "bf16"}
    row = _row(report.decode_targets(None, mlp), "MLP sustained replay at M >= 1024 against the short")
    assert row[1:] == ["1.50-1.76x", "int8_token M=1024: 1.50x", "missed by 0.08x"]
    big["sustained_vs_bf16"]["int8_token"] = 1.58
    assert _row(report.decode_targets(None, mlp), "MLP sustained replay")[3] == "**met**"  # at the baseline
    table = report.mlp_table(mlp)
    assert table[0].startswith("| M | bf16 graph / eager [/ sustained] us |")
    (line,) = [line for line in table if line.startswith("| 1024 |")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1].endswith(" / 600.0") and cells[1].count(" / ") == 2  # graph / eager / sustained
    assert cells[2].split(",")[0].endswith(" / 1.76") and cells[2].count(" / ") == 2
    (small,) = [line for line in table if line.startswith("| 1 |")]
    assert small.count(" / ") == 1 + 3  # bf16's graph / eager and each key's: no sustained figure at one token


def test_runs_timed_after_a_foreign_kernel_get_target_rows_of_their_own():
    """``bench gemm`` and ``bench mlp`` also time each call after another library's kernel (no PDL overlap with
    the call before, as in a decoder): the targets table then has each GEMM rate line and each MLP graph line again,
    over those figures; files without them (the thirty-first round's) show no such row."""
    gemm, mlp = _doc("run2_gemm.json"), _doc("run2_mlp.json")
    before = report.decode_targets(gemm, mlp)
    assert not any("after a foreign kernel" in line for line in before)
    for r in gemm["rows"]:
        r["weight_TBps_after_foreign"] = {"ours": r["weight_TBps"]["ours"] * 0.9}
        r["pct_ceiling_after_foreign"] = {"ours": r["pct_ceiling"]["ours"] * 0.9}
        r["us_after_foreign"] = {"ours": r["us"]["ours"] / 0.9}
    for r in mlp["rows"]:
        r["graph_after_foreign_us"] = dict(r["graph_us"])
        r["graph_after_foreign_vs_bf16"] = {k: v - 0.05 for k, v in r["graph_vs_bf16"].items()}
    after = report.decode_targets(gemm, mlp)
    assert len(after) == len(before) + 3 + 3  # three GEMM rate lines, three MLP graph lines
    few = [r["weight_TBps_after_foreign"]["ours"] for r in gemm["rows"] if r["M"] <= 16]
    slow = _row(after, "GEMM weights >= 3.6 TB/s at M = 1-16, after a foreign kernel")
    assert slow[1] == f"{min(few):.2f}-{max(few):.2f} TB/s"
    assert slow[2].split(":")[0] == _row(before, "GEMM weights >= 3.6 TB/s at M = 1-16 |")[2].split(":")[0]
    ratios = [v for r in mlp["rows"] if r["M"] in (1, 16) for v in r["graph_after_foreign_vs_bf16"].values()]
    foreign = _row(after, "MLP graph >= 1.9x bf16 at M = 1 / 16, after a foreign kernel")
    assert foreign[1] == f"{min(ratios):.2f}-{max(ratios):.2f}x"
    assert report.sort_out(gemm)[1] is None and report.sort_out(mlp)[1] is None  # the files' fields are read


def test_producer_ratios_divide_each_time_by_ours_timed_the_same_way():
    """A graph replay's time over ours replayed (not over do_bench's ours, host time in it), a loop's over ours in
    the loop; the bare relu2 kernel's loop is a ratio only on the op it runs. Times: act_quant.json's silu_mul ->
    int8 per-token row at one token (an H200), and its relu2 -> FP8 static row."""
    from benchmarks.bench import speedups

    silu = {"ours": 7.55, "ours_op": 7.49, "compiled": 47.49, "copy": 5.06, "ours_graph": 3.25,
            "compiled_graph": 5.12, "ours_loop": 18.42, "compiled_loop": 70.23, "bare_triton_loop": 20.15}
    got = speedups(silu)
    assert got["speedup_vs"] == pytest.approx({"ours_op": 7.49 / 7.55, "compiled": 47.49 / 7.55,
                                               "compiled_graph": 5.12 / 3.25})  # 1.58x, not 0.68x
    assert got["loop_speedup_vs"] == pytest.approx({"compiled": 70.23 / 18.42})
    relu2 = {"ours": 4.93, "bare_triton": 3.87, "ours_graph": 1.22, "bare_triton_graph": 1.32, "ours_loop": 15.42,
             "bare_triton_loop": 20.44}
    got = speedups(relu2)
    assert got["speedup_vs"] == pytest.approx({"bare_triton": 3.87 / 4.93, "bare_triton_graph": 1.32 / 1.22})
    assert got["loop_speedup_vs"] == pytest.approx({"bare_triton": 20.44 / 15.42})
    assert "loop_speedup_vs" not in speedups({"ours": 9.0, "compiled": 18.0})  # M > 256: no loops timed


def _written(tmp_path, doc, name: str = "doc.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def _mlp_without(row: int, field: str) -> dict:
    mlp = _doc("run2_mlp.json")
    del mlp["rows"][row][field]
    return mlp


def _gemm_with(row: int, field: str, value) -> dict:
    gemm = _doc("run2_gemm.json")
    gemm["rows"][row][field] = value
    return gemm


def _host_with(key: str, value) -> dict:
    host = _doc("run2_host1.json")
    host["us_per_call"][key] = value
    return host


def _act_with(**fields) -> dict:
    return {"ceiling_GBps": 4270.0, "versions": {}, "rows": [_ACT_ROW, {**_ACT_ROW, **fields}]}


@pytest.mark.parametrize("doc, said", [
    (_mlp_without(3, "sqnr_db"), "is an mlp file the tables cannot read (one of an older bench version?): rows[3] "
     "lacks 'sqnr_db'"),
    (_gemm_with(2, "M", "1"), "rows[2]['M'] is str \"1\", not a whole number"),
    (_gemm_with(0, "us", None), "rows[0]['us'] is NoneType null, not a mapping"),
    (_gemm_with(1, "us", {"ours": 3.0, "bf16": True}), "rows[1]['us']['bf16'] is bool true, not a number"),
    (_gemm_with(1, "weight_TBps", {"bf16": 3.0}), "rows[1]['weight_TBps'] lacks 'ours'"),
    (_host_with("fp8_static", [1, 2]), "us_per_call['fp8_static'] is list [1, 2], not a mapping"),
    (_host_with("fp8_static", {"mlp": "45.0"}), "us_per_call['fp8_static']['mlp'] is str \"45.0\", not a number"),
    (_act_with(us={"compiled": 3.0, "ours": None}), "rows[1]['us']['ours'] is NoneType null, not a number"),
    (_act_with(GBps={}), "rows[1]['GBps'] lacks 'ours'"),
    ({"ceiling_GBps": "4270", "versions": {}, "rows": [_ACT_ROW]}, "'ceiling_GBps' is str \"4270\", not a number"),
    ({"rows": [{"kind": "fp8", "M": 16, "us": {"bf16": 2, "fused": 1}, "speedup_vs_bf16": 2,
                "speedup_vs_compiled_chain": 1}]}, "rows[0]['us'] lacks 'compiled_chain'"),
], ids=["mlp-old", "gemm-M-text", "gemm-us-null", "gemm-bool", "gemm-no-ours", "host-list", "host-text",
        "act-null", "act-no-gbps", "act-ceiling-text", "legacy"])
def test_a_bench_file_the_tables_cannot_read_is_refused_naming_the_field(doc, said, tmp_path, capsys):
    """Each field the tables read is checked before a table is made: a file of an older bench version, a text
    where a number belongs, a null, a missing figure is refused (2) naming the field (tracebacks before)."""
    assert report.main([_written(tmp_path, doc)]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert report.kind_of(doc) is None


@pytest.mark.parametrize("doc, said", [(None, "it holds NoneType null"), ({}, "it is an empty mapping"),
                                       ({"rows": [], "versions": {}}, "its rows are empty"),
                                       ("[" * 100000, "cannot read")],
                         ids=["null", "empty", "no-rows", "nested-deep"])
def test_a_file_with_nothing_to_read_says_what_it_holds(doc, said, tmp_path, capsys):
    path = _written(tmp_path, doc if isinstance(doc, str) else json.dumps(doc))
    assert report.main([path]) == 2
    assert said in capsys.readouterr().err


def _targets(*argv) -> list[str]:
    return report.decode_targets(*argv)


@pytest.mark.parametrize("first", [True, False], ids=["nan-first", "nan-second"])
def test_a_failed_timing_is_not_measured_wherever_it_stands(first):
    """A NaN among the times a target takes the least of (the peers of a GEMM row, the host runs, the two token
    counts of a producer target) is "not measured", in whichever place it stands (before, the order decided)."""
    nan = math.nan
    fp32, own = "scaled_mm (fp32 + epilogue)", "scaled_mm (row-wise)"
    us = {"ours": 10.0, "small_m": 10.1, **({fp32: nan, own: 20.0} if first else {own: 20.0, fp32: nan})}
    row = {"shape": "down", "kind": "fp8", "M": 16, "picked": "small_m_fp8", "us": us,
           "weight_TBps": {"ours": 2.0}, "pct_ceiling": {"ours": 50.0}}
    table = _targets({"rows": [row]})
    assert _row(table, "GEMM never slower than the best other provider, where the chain picks its own")[3] == \
        "not measured: a value is NaN, infinite or a zero time"
    assert _row(table, "FP8 down at M = 16 >= 1.4x torch._scaled_mm in its quickest way")[3] == \
        "not measured: a value is NaN, infinite or a zero time"
    runs = [_doc("run2_host1.json"), _doc("run2_host2.json")]
    runs[0 if first else 1]["us_per_call"]["fp8_static"]["producer silu_mul"] = nan
    assert _row(_targets(None, None, tuple(runs)), "host <= 12 us per producer")[3] == \
        "not measured: a value is NaN, infinite or a zero time"
    act = [{**_ACT_ROW, "op": "relu2 -> fp8 static", "M": m, "pct_ceiling": {"ours": 93.0},
            "speedup_vs": {"compiled": 1.5}} for m in (8192, 32768)]
    act[0 if first else 1]["pct_ceiling"]["ours"] = nan
    (line,) = [line for line in report.targets_table(act) if line.startswith("| relu2")]
    assert line.endswith("| not measured: a value is NaN, infinite or a zero time |")


def test_a_zero_time_is_not_measured():
    row = _gemm_row("small_m_fp8", ours=0.0, small_m=9.0, **{"scaled_mm (row-wise)": 20.0})
    row.update(M=16)
    table = _targets({"rows": [row]})
    assert _row(table, "FP8 down at M = 16 >= 1.4x torch._scaled_mm with its own")[3] == \
        "not measured: a value is NaN, infinite or a zero time"
    assert report.gemm_table({"rows": [row]})[2] == "| down | fp8 | 2.00 TB/s, infx |"


def test_a_nan_sqnr_is_not_measured_with_or_without_a_baseline():
    mlp, base = _doc("run2_mlp.json"), _doc("run2_mlp.json")
    base["rows"][0]["sqnr_db"]["int8_token"] = math.nan
    assert _row(_targets(None, mlp, (), base), "MLP SQNR")[3] == "not measured: a value is NaN, infinite or a zero time"
    mlp["rows"][1]["sqnr_db"]["fp8_static"] = math.nan
    assert _row(_targets(None, mlp), "MLP SQNR against bf16")[3] == "not measured: a value is NaN, infinite or a zero time"


def test_a_baseline_of_other_token_counts_says_so():
    mlp, base = _doc("run2_mlp.json"), _doc("run2_mlp.json")
    for r in base["rows"]:
        r["M"] += 1
    assert _row(_targets(None, mlp, (), base), "MLP SQNR")[3] == \
        "not in the baseline: no token count and key in common with this run"


def test_the_mlp_table_has_a_column_for_every_key_of_any_row():
    """A key one row did not time (the first row included) is a dash there, its column still in the table."""
    mlp = _doc("run2_mlp.json")
    for field in ("graph_vs_bf16", "eager_vs_bf16", "sqnr_db"):
        del mlp["rows"][0][field]["int8_token"]
    table = report.mlp_table(mlp)
    assert "int8_token graph / eager x, SQNR dB" in table[0]
    (first,) = [line for line in table if line.startswith(f"| {mlp['rows'][0]['M']} |")]
    assert first.endswith("| — / —, — |")
    assert report.kind_of(mlp) == "mlp"


def test_a_first_version_mlp_file_has_a_header():
    legacy = {"rows": [{"kind": "fp8", "M": 16, "us": {"bf16": 2.0, "fused": 1.0, "compiled_chain": 1.5},
                        "speedup_vs_bf16": 2.0, "speedup_vs_compiled_chain": 1.5}]}
    assert report.mlp_rows(legacy, "triton_fp8") == [
        "| backend | kind | M | bf16 us | fused us | compiled chain us | vs bf16 | vs compiled chain |",
        "|---|---|---|---|---|---|---|---|", "| triton_fp8 | fp8 | 16 | 2.0 | 1.0 | 1.5 | 2.00x | 1.50x |"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device every write to fails)")
def test_report_output_that_cannot_be_written_is_one_line_and_status_74():
    gemm = str(ROUND31 / "run2_gemm.json")
    done = subprocess.run([sys.executable, "-m", "benchmarks.report", gemm], stdout=open("/dev/full", "w"),
                          stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert done.returncode == cli.OUTPUT_FAILED
    assert done.stderr == "report: cannot write its output: No space left on device\n"


def test_report_into_a_closed_pipe_exits_141_without_a_traceback():
    """`python -m benchmarks.report FILE | head -1`: the reader gone (here before the first write) is 141 and no
    traceback, as for ``fused-quant``."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.report", str(ROUND31 / "run2_gemm.json")],
                              stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    finally:
        os.close(write)
    assert done.returncode == cli.BROKEN_PIPE, done.stderr
    assert done.stderr == ""


def test_a_zero_host_time_is_not_measured():
    """Lower is better for host times: a zero time is a failed timing, not a met target."""
    runs = [_doc("run2_host1.json")]
    runs[0]["us_per_call"]["fp8_static"]["QuantLinear(qa) down"] = 0.0
    assert _row(_targets(None, None, tuple(runs)), "host <= 12 us per QuantLinear")[3] == \
        "not measured: a value is NaN, infinite or a zero time"


@pytest.mark.parametrize("field, value", [("device", "NVIDIA H100 80GB HBM3"), ("tree", "0123456789ab+changes"),
                                          ("torch", "2.9.0"), ("env", {"FUSED_QUANT_DISABLED_GEMMS": "small_m_fp8"})])
def test_files_of_two_runs_that_differ_are_not_one_table(tmp_path, capsys, field, value):
    """An H100's gemm.json read with an H200's mlp.json and host files printed one "measured on" line, the first
    file's, over every row, and took host minimums across both devices; other versions, trees or variables went
    unsaid. The files of one table must agree on each thing both record."""
    gemm, mlp, host = _doc("run2_gemm.json"), _doc("run2_mlp.json"), _doc("run2_host2.json")
    for doc in (gemm, mlp, host):  # what today's bench records and these files, of an older one, do not
        doc["versions"].update(tree="fedcba987654", env={})
    host["versions"][field] = value
    files = [_written(tmp_path, doc, f"{name}.json") for name, doc in (("gemm", gemm), ("mlp", mlp), ("host", host))]
    assert report.main(files) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"report: one decode table is one run's files; the files differ in {field}: ")
    assert files[2] in err and f"{files[0]}, {files[1]}" in err
    del host["versions"][field]  # a field one file does not record (an older bench's) is not compared
    assert report.main([files[0], files[1], _written(tmp_path, host, "host.json")]) == 0


def test_another_model_is_not_one_table_with_llama():
    a, b = _doc("run2_gemm.json"), _doc("run2_mlp.json")
    b["model"] = "Qwen2.5-7B"
    assert report.mixed_runs([("a", a), ("b", b)]).startswith("the files differ in model: ")
    assert report.mixed_runs([("a", a), ("b", _doc("run2_mlp.json"))]) == ""


@pytest.mark.parametrize("peer", [0.0, -1.0])
def test_a_zero_time_of_a_peer_is_not_measured_either(peer):
    """A zero time was a failed timing only as the divisor: a peer's zero made the ratio 0, the "best other", and
    the verdict "missed by 1.40x"."""
    row = _gemm_row("small_m_fp8", ours=20.0, small_m=20.0, **{"scaled_mm (row-wise)": 30.0,
                                                               "scaled_mm (fp32 + epilogue)": peer})
    row.update(M=16)
    table = _targets({"rows": [row]})
    for target in ("FP8 down at M = 16 >= 1.4x torch._scaled_mm in its quickest way",
                   "GEMM never slower than the best other provider, where the chain picks its own"):
        assert _row(table, target)[3] == "not measured: a value is NaN, infinite or a zero time"
    assert report.ratio(30.0, 20.0) == 1.5 and math.isnan(report.ratio(math.nan, 0.0))
