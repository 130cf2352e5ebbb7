"""``benchmarks/quantizing_calls.py``: which quantizing calls it times (every one a config the small-M kernel
quantizes the problem's tokens in, no repeats, the bound pick among them), that it stops cleanly without a GPU, and on
the GPU one small run whose every variant has the bits of the producer then the GEMM."""

from __future__ import annotations

import pytest
import torch

from fused_quant.kernels import gemm_launch as g
from fused_quant.gemm import GemmProblem

from benchmarks import quantizing_calls as qc
from benchmarks.decode import SHAPES, table_arch


@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("m", [1, 2, 5, 16])
def test_candidates_quantize_the_problems_tokens_without_repeats(kind, shape, m):
    pytest.importorskip("triton")
    n, k = SHAPES[shape]
    got = qc.candidates("sm_90", kind, n, k, m)
    configs = [cfg for _, cfg in got]
    assert configs, "the sm_90 table has rows that quantize up to 16 tokens"
    assert all(g.quantizes_float_input(cfg, m, kind) for cfg in configs)
    assert all(configs.count(cfg) == 1 for cfg in configs)
    wider = [cfg for label, cfg in got if label.startswith("one-token row of")]
    assert len(wider) == (len(qc.ONE_TOKEN_WIDER) if (kind, m) == ("int8", 1) else 0)
    table, _ = g.small_m_config("sm_90", kind, n, k, m, ())
    if table is not None and g.quantizes_float_input(table, m, kind):  # what the package binds is timed
        p = GemmProblem(m, n, k, kind, torch.int8, torch.bfloat16, torch.device("cpu"), True, True, False)
        assert g.quantizing_config(p, table, "sm_90") in configs


def test_one_token_rows_keep_64_lane_sums_a_thread():
    for bn, bk, warps in qc.ONE_TOKEN_WIDER:
        assert bn * bk == 64 * 32 * warps


def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        qc.main(["--out", str(out)])
    assert stop.value.code == 2
    assert capsys.readouterr().err == "quantizing_calls: needs a GPU (torch.cuda.is_available() is False)\n"
    assert not out.exists()


def test_install_into_the_packages_folder_is_refused_before_anything_runs(capsys):
    """``--out`` the package's folder with ``--install`` would write the run's rows over the installed table before
    merging them: refused before any GPU is asked, the table untouched."""
    before = g.SMALL_M_QUANTIZING_FILE.read_text()
    with pytest.raises(SystemExit) as stop:
        qc.main(["--out", str(g.SMALL_M_QUANTIZING_FILE.parent), "--install"])
    assert stop.value.code == 2 and "is the package's folder" in capsys.readouterr().err
    assert g.SMALL_M_QUANTIZING_FILE.read_text() == before


@pytest.mark.gpu
@pytest.mark.parametrize("own_rows", [False, True], ids=["arch", "own-rows"])
def test_a_small_run_times_every_variant_with_the_producers_bits(tmp_path, monkeypatch, own_rows):
    """int8 per-token o at one token: the baseline, every candidate that fits (a difference in bits raises), the
    bound pick marked once; the JSON, table and picture written; ``--install`` merges the fastest into the table, as
    the arch's rows or (``--own-rows``) as this GPU model's own, which the provider reads for this GPU only."""
    import json

    import fused_quant
    from fused_quant.kernels import launch

    table = tmp_path / "package" / "installed.json"  # not in --out: the run's own file there has the table's name
    table.parent.mkdir()
    monkeypatch.setattr(g, "SMALL_M_QUANTIZING_FILE", table)
    argv = ["--out", str(tmp_path), "--kinds", "int8", "--shapes", "o", "--ms", "1", "--install"]
    assert qc.main(argv + (["--own-rows"] if own_rows else [])) == 0

    rows = json.loads((tmp_path / "quantizing_calls.json").read_text())["rows"]
    assert rows[0]["variant"] == qc.BASELINE and len(rows) >= 2
    assert all(r["us"] > 0 for r in rows)
    assert sum(r["picked"] for r in rows) == 1
    assert (tmp_path / "quantizing_calls.txt").read_text().count("M=  1") == len(rows)
    installed = json.loads(table.read_text())["rows"]
    quickest = min((r for r in rows if r["variant"] != qc.BASELINE), key=lambda r: r["us"])
    assert [(r["shape"], r["m"], r["us"]) for r in installed] == [("o", 1, quickest["us"])]
    assert (tmp_path / "quantizing_calls.png").stat().st_size > 0
    index = torch.cuda.current_device()
    model, arch = launch.device_name(index), table_arch(index)
    assert installed[0].get("device") == (model if own_rows else None)
    n, k = SHAPES["o"]
    fused_quant.reset()  # the run read the table before its install: the one reset re-reads it
    mine, _ = g._swept_row(arch, "int8", n, k, 1, table, model)
    other, why = g._swept_row(arch, "int8", n, k, 1, table, "another GPU model")
    assert mine is not None and mine["us"] == quickest["us"]
    assert (other is None and "no measured int8" in why) if own_rows else other == mine


def test_plot_draws_the_baseline_the_pick_and_the_fastest(tmp_path):
    if qc.pyplot() is None:
        pytest.skip("matplotlib is not installed")
    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1, num_warps=4, num_stages=4)
    rows = []
    for m in (1, 16):
        rows.append(dict(kind="int8", shape="o", m=m, variant=qc.BASELINE, config=cfg, us=20.0, baseline_us=20.0,
                         picked=False))
        rows.append(dict(kind="int8", shape="o", m=m, variant="table's 2-token row", config=cfg, us=22.0,
                         baseline_us=20.0, picked=True))
    assert qc.plot(rows, tmp_path / "p.png") and (tmp_path / "p.png").stat().st_size > 0
    assert qc.plot([], tmp_path / "none.png") is False


def test_install_keeps_the_fastest_int8_config_of_each_shape_and_m():
    """``fastest``: per int8 (shape, M) the quickest quantizing variant, with the baseline's and the table row's own
    times; FP8 rows are not installed (other configs add their fp32 sums in another order)."""
    one, two = dict(BLOCK_N=8, BLOCK_M=1, BLOCK_K=1024, splits=1, num_warps=4, num_stages=1), \
        dict(BLOCK_N=256, BLOCK_M=16, BLOCK_K=128, splits=1, num_warps=8, num_stages=4)
    down, o, other = dict(shape="down", n=4096, k=14336), dict(shape="o", n=4096, k=4096), \
        dict(shape="down", n=3584, k=18944)  # another model's down: the same label, its own rows
    rows = [dict(kind="int8", **down, m=1, variant=qc.BASELINE, config=one, us=23.1, baseline_us=23.1),
            dict(kind="int8", **down, m=1, variant="table's 1-token row", config=one, us=49.4, baseline_us=23.1),
            dict(kind="int8", **down, m=1, variant="one-token row of 8", config=one, us=23.7, baseline_us=23.1),
            dict(kind="int8", **down, m=1, variant="table's 2-token row", config=two, us=38.8, baseline_us=23.1),
            dict(kind="fp8", **down, m=16, variant="table's 16-token row", config=two, us=1.0, baseline_us=2.0),
            dict(kind="int8", **o, m=16, variant=qc.BASELINE, config=two, us=9.0, baseline_us=9.0),
            dict(kind="int8", **other, m=1, variant=qc.BASELINE, config=one, us=30.0, baseline_us=30.0),
            dict(kind="int8", **other, m=1, variant="table's 2-token row", config=two, us=31.0, baseline_us=30.0)]
    own = qc.fastest(rows, "sm_90", {"device": "d"}, "NVIDIA A GPU")  # --own-rows: the model's own rows
    assert own["rows"] and all(r["device"] == "NVIDIA A GPU" for r in own["rows"])
    table = qc.fastest(rows, "sm_90", {"device": "d"})
    assert table["meta"] == {"device": "d"} and all("device" not in r for r in table["rows"])
    assert table["rows"] == [dict(arch="sm_90", kind="int8", **down, m=1, **one, us=23.7, baseline_us=23.1,
                                  row_us=49.4, variant="one-token row of 8"),
                             dict(arch="sm_90", kind="int8", **other, m=1, **two, us=31.0, baseline_us=30.0,
                                  row_us=None, variant="table's 2-token row")]


def test_tune_act_quant_refuses_a_filter_that_matches_no_case(capsys, monkeypatch):
    """``benchmarks/tune_act_quant.py``'s filter (its last argument) that holds no case's 'act key' would time
    nothing and exit 0: a usage error naming the cases there are, before any GPU is asked. (Here with the other
    benchmark script's checks: it has no test file of its own.)"""
    tune = pytest.importorskip("benchmarks.tune_act_quant")  # it imports triton
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stop:
        tune.main(["16", "64", "gelu"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "no case's 'act key' holds 'gelu'; the cases are 'relu2 fp8_static_tensor', " in err
    assert "'silu_and_mul int8_dynamic_token'" in err, err
