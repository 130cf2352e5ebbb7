"""``fused-quant bench`` runs the checkout's benchmarks/ package: without a GPU, onto a used --out folder,
or with no benchmarks/ beside fused_quant/ it exits 2 with one line on stderr; its default output is a
fresh bench-out/ folder; and the fused_quant package itself holds no benchmark code."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fused_quant
from fused_quant import cli, flags

from benchmarks import timing

from tests.cli_fixtures import record_benchmarks

PACKAGE = Path(fused_quant.__file__).resolve().parent
CHECKOUT = PACKAGE.parent


def _no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_bench_without_gpu_says_so_cleanly(tmp_path):
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "FUSED_QUANT_BACKEND"} | {"CUDA_VISIBLE_DEVICES": ""}
    # the same fused_quant as this process's, whatever is installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "fused_quant", "bench", "act_quant", "--quick", "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=CHECKOUT)
    assert proc.returncode == 2
    assert "needs a GPU" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not out.exists()  # nothing is created for a run that cannot happen


def test_bench_refuses_a_non_empty_out_without_force(tmp_path, capsys, monkeypatch):
    _no_gpu(monkeypatch)
    (tmp_path / "act_quant.json").write_text("{}")
    assert cli.main(["bench", "act_quant", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "--force" in err and "needs a GPU" not in err
    assert (tmp_path / "act_quant.json").read_text() == "{}"
    # --force lifts the refusal: the run gets as far as the GPU check
    assert cli.main(["bench", "act_quant", "--out", str(tmp_path), "--force"]) == 2
    assert "needs a GPU" in capsys.readouterr().err


def test_bench_refuses_an_out_that_is_a_file(tmp_path, capsys, monkeypatch):
    _no_gpu(monkeypatch)
    target = tmp_path / "file"
    target.write_text("x")
    assert cli.main(["bench", "--out", str(target), "--force"]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_bench_default_out_is_a_fresh_folder_not_the_committed_results():
    from benchmarks import bench

    assert cli.build_parser().parse_args(["bench"]).out is None  # main picks default_out()
    out = bench.default_out()
    assert out.parent == CHECKOUT / "bench-out"
    assert out != CHECKOUT / "benchmarks" / "results" and not out.exists()
    assert "/bench-out/" in (CHECKOUT / ".gitignore").read_text().split()


def test_bench_default_out_is_used_when_out_is_not_given(tmp_path, capsys, monkeypatch):
    from benchmarks import bench, decode

    monkeypatch.setattr(bench, "BENCH_OUT", tmp_path / "bench-out")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(decode, "bench_mlp", lambda quick: {"rows": [], "quick": quick})
    monkeypatch.setattr(decode, "plot_mlp", lambda result, path: False)
    assert cli.main(["bench", "mlp", "--quick"]) == 0
    (run,) = (tmp_path / "bench-out").iterdir()
    assert [p.name for p in run.iterdir()] == ["mlp.json"]
    assert str(run) in capsys.readouterr().out


def test_runs_started_together_each_write_their_own_default_folder(tmp_path, capsys, monkeypatch):
    """Two runs in one second (the nodes of a shared checkout, or two on one node) had one folder, the second's files
    over the first's: the default names host and process too, and is made only where it is not there yet."""
    from benchmarks import bench, decode

    monkeypatch.setattr(bench, "BENCH_OUT", tmp_path / "bench-out")
    assert bench.default_out().name.endswith(f"-{os.getpid()}") and bench.default_out() == bench.default_out()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(decode, "bench_mlp", lambda quick: {"rows": [], "quick": quick})
    monkeypatch.setattr(decode, "plot_mlp", lambda result, path: False)
    taken = bench.default_out()
    taken.mkdir(parents=True)
    assert cli.main(["bench", "mlp", "--quick"]) == 2  # the same process in the same second: refused, not shared
    assert f"--out {taken} cannot be made" in capsys.readouterr().err and not any(taken.iterdir())


@pytest.mark.parametrize("where", ["file/sub", ""])
def test_an_out_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, where):
    from benchmarks import decode

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(decode, "bench_mlp", lambda quick: pytest.fail("ran without a folder"))
    (tmp_path / "file").write_text("x")
    out = str(tmp_path / where) if where else ""
    assert cli.main(["bench", "mlp", "--quick", "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == ("bench: --out is empty; name a folder" if not where else
                                        f"bench: --out {out} cannot be made: Not a directory")


def test_bench_m_reaches_the_benchmarks_it_names(tmp_path, monkeypatch):
    seen = record_benchmarks(monkeypatch)
    assert cli.main(["bench", "all", "--quick", "--m", "224, 1,224,16", "--out", str(tmp_path / "a")]) == 0
    ms = {"ms": (224, 1, 16)}  # in the order given, each once; host times M = 1 only
    assert seen == {"bench_act_quant": ms, "bench_gemm": ms, "bench_host": {}, "bench_mlp": ms}
    seen.clear()  # without --m each benchmark keeps its own default set
    assert cli.main(["bench", "gemm", "--out", str(tmp_path / "b")]) == 0
    assert seen == {"bench_gemm": {}}


def test_act_quant_where_triton_fp8_cannot_run_is_refused_alone_and_left_out_of_all(tmp_path, capsys, monkeypatch):
    """bench act_quant times the triton_fp8 producers: on a GPU that backend cannot run on (an AMD or pre-SM90 node of
    a mixed cluster) it is one line and exit 2 by itself (it was a BackendUnavailableError traceback mid-run), and
    `bench all` times the rest, saying it left it out."""
    from benchmarks import bench

    seen = record_benchmarks(monkeypatch)
    monkeypatch.setattr(bench, "_act_quant_unavailable", lambda: "times the triton_fp8 backend's producers, which "
                                                                 "cannot run here: needs sm_90+")
    assert cli.main(["bench", "act_quant", "--quick", "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err.strip() == ("bench: act_quant times the triton_fp8 backend's producers, which "
                                               "cannot run here: needs sm_90+")
    assert not (tmp_path / "a").exists() and not seen
    assert cli.main(["bench", "all", "--quick", "--out", str(tmp_path / "b")]) == 0
    assert set(seen) == {"bench_gemm", "bench_host", "bench_mlp"}
    assert "bench: act_quant left out: times the triton_fp8 backend's producers" in capsys.readouterr().out


def test_a_backend_that_cannot_run_here_stops_bench_before_its_folder_and_the_one_that_runs_is_named(
        tmp_path, capsys, monkeypatch):
    """``FUSED_QUANT_BACKEND`` naming a backend this node cannot run (triton_fp8 here) is one line and exit 2 before
    the folder is made (it was a traceback at the first layer, the folder left empty); a run says which backend
    "ours" is and records it, with the FUSED_QUANT_* values, beside the versions."""
    seen = record_benchmarks(monkeypatch)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "triton_fp8")
    fused_quant.reset()
    assert cli.main(["bench", "mlp", "--quick", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: FUSED_QUANT_BACKEND=triton_fp8") and err.count("\n") == 1
    assert not (tmp_path / "a").exists() and not seen
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "torch")
    fused_quant.reset()
    assert cli.main(["bench", "mlp", "--quick", "--out", str(tmp_path / "b")]) == 0
    assert "bench: backend torch (" in capsys.readouterr().out
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "A GPU")
    got = timing.versions()
    assert got["backend"] == "torch" and got["env"] == {"FUSED_QUANT_BACKEND": "torch"}


def test_bench_host_refuses_m(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cli.main(["bench", "host", "--m", "16", "--out", str(tmp_path / "out")]) == 2
    assert "host times M = 1 only" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_profile_host_refuses_a_token_count_below_one(bad, capsys, monkeypatch):
    from benchmarks import profile_host

    monkeypatch.setattr(sys, "argv", ["profile_host", "--m", bad])
    with pytest.raises(SystemExit) as stop:
        profile_host.main()
    assert stop.value.code == 2
    assert f"argument --m: expected a token count >= 1, got '{bad}'" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["0", "16,-1", "1,,2", "1.5", "a", "", "\u00b2", "\u0661\u0662", "65537",
                                 "16,99999999999999999999"])
def test_bench_m_refuses_what_is_not_a_token_count(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "mlp", "--m", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--m" in err and "expected token counts >= 1 (at most 65536) separated by commas" in err
    assert repr(bad) in err
    # the list named only where the refused part is not the whole of it
    assert (f"in {bad!r}" in err) == ("," in bad), err


def test_bench_without_a_benchmarks_folder_says_where_it_looked(tmp_path, capsys, monkeypatch):
    # an installed wheel: fused_quant/ in site-packages, no benchmarks/ beside it
    monkeypatch.setattr(fused_quant, "__file__", str(tmp_path / "site-packages" / "fused_quant" / "__init__.py"))
    assert cli.main(["bench", "act_quant", "--quick"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert str(tmp_path / "site-packages" / "benchmarks" / "bench.py") in lines[0]
    assert "source checkout" in lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_package_holds_no_benchmark_code():
    import importlib.util

    for name in ("fused_quant.bench", "fused_quant.bench_peers", "fused_quant.kernels.triton.peer_kernels"):
        assert importlib.util.find_spec(name) is None, name
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
        benchmarks = [m for m in imported if m == "benchmarks" or m.startswith("benchmarks.")]
        assert not benchmarks, f"fused_quant/{rel} imports {benchmarks}"
        if rel != "cli.py":
            assert "do_bench" not in path.read_text(), f"fused_quant/{rel} times code (triton.testing.do_bench)"


def test_sqnr_db_of_known_noise_identity_and_non_finite_outputs():
    import math

    from benchmarks.decode import sqnr_db

    ref = torch.tensor([[3.0, -4.0], [0.0, 0.0]], dtype=torch.bfloat16)  # signal: 25
    assert sqnr_db(ref, ref) == math.inf
    assert math.isclose(sqnr_db(ref, ref + torch.tensor([[0.5, 0.0], [0.0, 0.0]], dtype=torch.bfloat16)),
                        10 * math.log10(25 / 0.25))
    assert math.isnan(sqnr_db(ref, torch.tensor([[3.0, float("nan")], [0.0, 0.0]])))
    assert math.isnan(sqnr_db(ref, torch.tensor([[float("inf"), -4.0], [0.0, 0.0]])))
    inf = torch.tensor([float("inf"), 1.0])
    assert math.isnan(sqnr_db(inf, inf))  # no SQNR of a non-finite reference, even reproduced
    assert sqnr_db(torch.zeros(2), torch.tensor([0.0, 1e-3])) == -math.inf


def test_stream_fit_recovers_a_fixed_cost_and_a_rate_and_the_size_a_target_needs():
    from benchmarks.decode import SHAPES, stream_fit

    def row(kind, m, n, k, ours, copy):
        return {"kind": kind, "M": m, "N": n, "K": k, "us": {"ours": ours}, "copy_same_bytes_us": copy}

    # ours: 3 us + bytes at 4 TB/s (4e6 bytes per us); the copy: 2 us + bytes at 4.5 TB/s
    rows = [row("fp8", 16, n, k, 3 + n * k / 4e6, 2 + n * k / 4.5e6) for n, k in SHAPES.values()]
    rows.append(row("int8", 1, 4096, 4096, 5.0, None))  # one shape: no line
    fits = {(f["kind"], f["M"], f["peer"]): f for f in stream_fit(rows)}
    assert set(fits) == {("fp8", 16, "ours"), ("fp8", 16, "copy")}
    ours, copy = fits["fp8", 16, "ours"], fits["fp8", 16, "copy"]
    assert abs(ours["fixed_us"] - 3) < 1e-9 and abs(ours["stream_TBps"] - 4) < 1e-9
    assert abs(copy["fixed_us"] - 2) < 1e-9 and abs(copy["stream_TBps"] - 4.5) < 1e-9
    assert ours["worst_residual_us"] < 1e-9
    # 3.6 TB/s where 3 + b / 4e6 = b / 3.6e6, i.e. b = 3 / (1 / 3.6e6 - 1 / 4e6) = 108 MB
    assert abs(ours["bytes_for_3_6_TBps"] - 108e6) < 1
    slow = stream_fit([row("fp8", 1, n, k, 1 + n * k / 3e6, None) for n, k in SHAPES.values()])
    assert slow[0]["bytes_for_3_6_TBps"] is None  # streams below the target: no size reaches it


def test_int8_sweep_picks_the_least_sum_over_shapes_among_configs_every_shape_ran():
    """``sweep_int8_gemm.per_m``: per M, each candidate's time summed over the shapes; a config that failed
    on one shape (no time) is not a choice, and the least sum is the pick, not the best of one shape."""
    from benchmarks import sweep_int8_gemm as s

    a, b, c = (str(cfg) for cfg in s.CANDIDATES[:3])
    peers = {"installed": 10.0, "int_mm + epilogue": 30.0, "scaled_mm fp8 (tensor-wise)": 8.0}

    def row(shape, m, configs):
        return {"shape": shape, "M": m, "us": peers, "configs": configs}

    rows = [row("qkv", 512, {a: {"us": 1.0}, b: {"us": 5.0}, c: {"us": 0.5}}),
            row("down", 512, {a: {"us": 9.0}, b: {"us": 4.0}, c: {"error": "OutOfResources: shared memory"}}),
            row("qkv", 1024, {a: {"us": 2.0}, b: {"us": 3.0}, c: {"us": 3.0}})]
    got = {r["M"]: r for r in s.per_m(rows)}
    assert got[512]["best"] == b and got[512]["sum_us"] == {a: 10.0, b: 9.0}  # c failed on down; a won qkv alone
    assert got[512]["installed_sum_us"] == 20.0 and got[512]["int_mm_sum_us"] == 60.0
    assert got[1024]["best"] == a and got[1024]["fp8_sum_us"] == 8.0
    assert got[512]["small_m_sum_us"] is None  # no shape timed the small-M GEMM
    small = [{**row("qkv", 256, {a: {"us": 2.0}}), "us": {**peers, "small_m": 1.5}},
             {**row("down", 256, {a: {"us": 3.0}}), "us": {**peers, "small_m": 4.0}}]
    assert s.per_m(small)[0]["small_m_sum_us"] == 5.5
    assert set(s.candidates(256)) - set(s.candidates(512)) == set(s.SMALL_TILES)  # 64-token tiles at small M only
    failed = [row("qkv", 64, {a: {"us": 1.0}}), row("down", 64, {b: {"us": 1.0}})]
    with pytest.raises(SystemExit, match="M=64: no candidate config ran on every shape"):
        s.per_m(failed)


def test_timed_passes_times_every_call_in_two_passes_the_second_reversed():
    """``timing.timed_passes`` (the int8 sweep's and ``bench gemm``'s): each call timed once per pass, the second
    pass in the reverse order, so the call timed first in one pass is timed last in the other."""
    from benchmarks import timing as s

    order, clock = [], iter(range(100))

    def time_of(call):
        order.append(call)
        return float(next(clock))

    got = s.timed_passes({"a": "A", "b": "B", "installed": "I"}, time_of)
    assert order == ["A", "B", "I", "I", "B", "A"]
    assert got == {"a": [0.0, 5.0], "b": [1.0, 4.0], "installed": [2.0, 3.0]}


def test_trace_critical_path_shares_add_up_to_the_call_and_overlaps_are_negative_gaps():
    """``trace_mlp.critical_path``: per kernel of a call, the mean (over calls 2..N) of its end minus the previous
    kernel's end and of its duration; the shares add up to the GPU time per call; a kernel that starts before the
    previous one ends (programmatic dependent launch) has a share below its duration."""
    from benchmarks.trace_mlp import critical_path

    names = ("act_quant_token_kernel", "small_m_gemm_kernel", "act_quant_token_split_absmax_kernel",
             "act_quant_token_split_kernel", "small_m_gemm_kernel", "split_k_epilogue_kernel")
    durations = (1.0, 30.0, 1.5, 1.0, 16.0, 1.5)
    overlap = 0.5  # each kernel starts this long before the one before it ends
    records, t = [], 0.0
    for _ in range(4):
        for name, d in zip(names, durations):
            start = t - overlap if records else t
            records.append((name, start, start + d))
            t = start + d
    got = critical_path(records, 4)
    assert [k["label"] for k in got["kernels"]] == ["per-token quantize", "small-M GEMM", "per-token absmax",
                                                    "per-token quantize (split rows)", "small-M GEMM",
                                                    "split-K epilogue"]
    assert [k["duration_us"] for k in got["kernels"]] == pytest.approx(durations)
    assert [k["share_us"] for k in got["kernels"]] == pytest.approx([d - overlap for d in durations])
    assert got["us_per_call"] == pytest.approx(sum(durations) - overlap * len(durations))
    assert sum(k["share_us"] for k in got["kernels"]) == pytest.approx(got["us_per_call"])
    with pytest.raises(ValueError, match="23 kernel records do not split into 4 calls"):
        critical_path(records[:-1], 4)
    shuffled = records[:6] + records[7:8] + records[6:7] + records[8:]
    with pytest.raises(ValueError, match="do not split into 4 calls of the same kernels"):
        critical_path(shuffled, 4)
    with pytest.raises(ValueError, match="at least 2 calls"):
        critical_path(records, 1)


def test_trace_labels_of_the_kernels_seen_on_a_gpu():
    """The kernel names of round 30's traces (H100, torch 2.11) get short labels; another keeps its name's start."""
    from benchmarks.trace_mlp import label

    seen = {"nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_TNT": "cuBLAS GEMM",
            "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>": "cuBLAS split-K reduce",
            "void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::silu_kernel("
            "at::TensorIteratorBase&)": "torch silu",
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor"
            "<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor": "torch mul",
            "act_quant_token_split_absmax_kernel": "per-token absmax", "split_k_epilogue_kernel": "split-K epilogue",
            "some_other_kernel_with_a_long_name_here": "some_other_kernel_with_a_long_na"}
    assert {name: label(name) for name in seen} == seen


@pytest.mark.parametrize("argv,message", [(["--m", "0"], "argument --m: expected token counts >= 1 separated"),
                                          (["--m", "1,x"], "expected token counts >= 1 separated by commas (like "
                                                           "1,16,224), got 'x' in '1,x'"),
                                          (["--calls", "1"], "--calls needs at least 2"),
                                          (["--model", "no-such-config.json"], "--model no-such-config.json: no "
                                                                               "such file"),
                                          (["--tp", "0"], "argument --tp: expected a whole number of GPUs >= 1, got "
                                                          "'0'"),
                                          (["--calls", "abc"], "argument --calls: expected a whole number >= 1, got "
                                                               "'abc'")])
def test_trace_refuses_bad_arguments_and_a_missing_gpu(argv, message, capsys, monkeypatch, tmp_path):
    from benchmarks import trace_mlp

    with pytest.raises(SystemExit) as stop:
        trace_mlp.main([*argv, "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    _no_gpu(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        trace_mlp.main(["--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and "trace_mlp: needs a GPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_trace_plot_draws_a_bar_per_row(tmp_path):
    pytest.importorskip("matplotlib")
    from benchmarks.trace_mlp import plot

    kernels = [{"kernel": "small_m_gemm_kernel", "label": "small-M GEMM", "share_us": 30.0, "duration_us": 30.5},
               {"kernel": "split_k_epilogue_kernel", "label": "split-K epilogue", "share_us": -0.2,
                "duration_us": 1.0}]
    result = {"versions": {"device": "test"}, "rows": [{"M": 16, "peer": "fp8_token", "us_per_call": 29.8,
                                                        "kernels": kernels},
                                                       {"M": 16, "peer": "bf16", "error": "records differ"}]}
    assert plot(result, str(tmp_path / "trace.png"))
    assert (tmp_path / "trace.png").stat().st_size > 1000
    assert not plot({"versions": {}, "rows": [result["rows"][1]]}, str(tmp_path / "none.png"))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.triton_fp8])])
def test_bench_host_calls_run_as_timed(device, backend_env):
    """Every call ``fused-quant bench host`` times and ``benchmarks/profile_host.py`` profiles runs as built and
    records no autograd (its bf16 layers' output required grad, and the producers refused every timed call): on
    this machine at small shapes with the torch backend, on a GPU at Llama-3-8B's with triton_fp8."""
    from benchmarks.decode import MLP_KEYS, host_calls

    from fused_quant import QuantizedActivation, fusion_counts, reset_fusion_counts

    backend = "torch" if device == "cpu" else "triton_fp8"
    backend_env(backend)
    calls, _ = host_calls(MLP_KEYS, **({"d": 64, "h": 96, "device": "cpu"} if device == "cpu" else {}))
    assert set(calls) == {"bf16", *MLP_KEYS}
    reset_fusion_counts()
    for name, fns in calls.items():
        for call, fn in fns.items():
            out = fn()
            if call.startswith("producer"):  # the backend's own producer, not a fallback
                assert type(out) is QuantizedActivation, (name, call, type(out))
                out = out.data
            assert out.device.type == device and not out.requires_grad, (name, call)
    assert {b for b, act, _ in fusion_counts() if act == "silu_and_mul"} == {backend}, fusion_counts()


def test_host_chunks_time_each_chunk_and_bench_host_shows_a_noisy_mean(monkeypatch, capsys):
    """``host_chunks``: us per call of each chunk, the sync outside the timing; ``bench_host`` keeps the mean as
    ``us_per_call`` and shows the chunks' median where one slow chunk (the host's noise) lifts the mean."""
    from benchmarks import decode, timing

    clock = [0.0]
    syncs = []
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda: syncs.append(clock[0]))
    costs = iter([10e-6] * 20 + [10e-6] * 200 + [1e-3] + [10e-6] * 99 + [20e-6] * 100)  # warm-up, 4 chunks

    def fn():
        clock[0] += next(costs)

    chunks = timing.host_chunks(fn, 400, 100)
    assert chunks == pytest.approx([10.0, 10.0, (1e3 + 99 * 10) / 100, 20.0])
    assert len(syncs) == 5  # after the warm-up and after each chunk
    assert timing.host_us(lambda: None, 200, 100) == pytest.approx(0.0)

    def fake_chunks(fn, n):
        return fn()

    monkeypatch.setattr(decode, "host_chunks", fake_chunks)
    monkeypatch.setattr(decode, "versions", lambda: {"device": "test"})
    shapes = []

    def fake_calls(keys, **shape):
        shapes.append(shape)
        return {"bf16": {"quiet": lambda: [10.0, 11.0, 12.0], "noisy": lambda: [10.0, 10.0, 100.0]}}, {}

    monkeypatch.setattr(decode, "host_calls", fake_calls)
    res = decode.bench_host()
    assert shapes == [{"d": 4096, "h": 14336}] and res["model"] == "Llama-3-8B"
    assert res["us_per_call"]["bf16"] == pytest.approx({"quiet": 11.0, "noisy": 40.0})
    assert res["us_per_call_chunk_median"]["bf16"] == pytest.approx({"quiet": 11.0, "noisy": 10.0})
    assert "host M=1 bf16: quiet 11.0  noisy 40.0 (chunk median 10.0) us/call" in capsys.readouterr().out


def test_progress_counts_done_and_estimates_the_rest_at_the_rate_so_far():
    from benchmarks.timing import progress

    assert progress(0, 8, 100.0, 100.0) == "[0/8, 0 s]"
    assert progress(2, 8, 100.0, 130.0) == "[2/8, 30 s, about 90 s left]"  # 15 s a row so far, 6 rows to go
    assert progress(8, 8, 100.0, 220.0) == "[8/8, 120 s]"


def test_profile_host_needs_a_gpu_and_says_so(capsys, monkeypatch):
    from benchmarks import profile_host

    monkeypatch.setattr(sys, "argv", ["profile_host", "--m", "1"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stop:
        profile_host.main()
    assert stop.value.code == 2
    assert "profile_host: needs a GPU (torch.cuda.is_available() is False)" in capsys.readouterr().err


def test_the_mlp_peers_record_no_autograd():
    """``bench mlp``'s bf16 MLP ran its eager calls with autograd recording (its linears' weights required grad),
    which cost its host time and inflated the eager speed-ups: every peer's call records none now, as a server's
    calls (and ``bench host``'s) record none."""
    from benchmarks import decode
    from fused_quant import keys as K

    x = torch.randn(3, 8, dtype=torch.bfloat16)
    for key in (None, K.kInt8DynamicTokenSym):
        for fn in decode._mlp(key, 8, 16, 2, device="cpu"):
            out = fn(x)
            assert out.shape == (3, 8) and not out.requires_grad and out.grad_fn is None, key


def test_a_call_after_a_foreign_kernel_is_the_pair_less_the_foreign_kernel(monkeypatch):
    """``timing.graph_us_after_foreign``: a graph of (foreign kernel, call) pairs, each pair counted as one call, less
    a graph of the foreign kernels alone, over as many calls; ``graph_turns`` times with it where asked."""
    from benchmarks import decode, timing

    cost = {timing.foreign_kernel: 1.5, "f1": 10.0, "f2": 12.0}
    seen = []

    def fake(fns, calls=None, replays=7):  # the mean time per call of fns called in turn
        seen.append((list(fns), calls))
        return sum(cost[f] for f in fns) / len(fns)

    monkeypatch.setattr(timing, "graph_us", fake)
    assert timing.graph_us_after_foreign(["f1", "f2"], calls=8) == 11.0  # (1.5 + 10 + 1.5 + 12) / 2 - 1.5
    assert seen == [([timing.foreign_kernel, "f1", timing.foreign_kernel, "f2"], 16), ([timing.foreign_kernel], 8)]
    monkeypatch.setattr(decode, "graph_us_after_foreign", timing.graph_us_after_foreign)
    assert decode.graph_turns({"a": ["f1"], "b": ["f2"]}, calls=8, time_of=decode.graph_us_after_foreign) == {
        "a": 10.0, "b": 12.0}


def test_graph_turns_time_every_peer_first_once_and_take_the_median(monkeypatch):
    """``decode.graph_turns``: one turn per peer, the order rotated (each peer first once), each peer's median."""
    from benchmarks import decode

    order, clock = [], iter(range(100))
    monkeypatch.setattr(decode, "graph_us", lambda fns, calls: order.append((fns[0], calls)) or float(next(clock)))
    got = decode.graph_turns({"a": ["fa"], "b": ["fb"], "c": ["fc"]}, calls=4)
    assert [f for f, _ in order] == ["fa", "fb", "fc", "fb", "fc", "fa", "fc", "fa", "fb"]
    assert {c for _, c in order} == {4}
    # a: 0, 5, 7 -> 5; b: 1, 3, 8 -> 3; c: 2, 4, 6 -> 4
    assert got == {"a": 5.0, "b": 3.0, "c": 4.0}


def test_sustained_turns_time_each_peer_twice_in_reversed_orders_and_take_the_mean(monkeypatch):
    """``decode.sustained_turns``: two turns, the second in the reverse order, each peer's mean."""
    from benchmarks import decode

    order, clock = [], iter([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    monkeypatch.setattr(decode, "sustained_us",
                        lambda fns, calls, seconds: order.append((fns[0], calls, seconds)) or next(clock))
    got = decode.sustained_turns({"a": ["fa"], "b": ["fb"], "c": ["fc"]}, calls=8, seconds=1.5)
    assert [f for f, _, _ in order] == ["fa", "fb", "fc", "fc", "fb", "fa"]
    assert {(c, s) for _, c, s in order} == {(8, 1.5)}
    assert got == {"a": 16.5, "b": 9.0, "c": 6.0}  # a: 1, 32; b: 2, 16; c: 4, 8


def test_sustained_rows_time_the_large_token_counts_on_their_own_inputs(monkeypatch, capsys):
    """``decode.sustained_rows``: rows from ``SUSTAINED_FROM`` tokens on get their peers' sustained times and the
    ratios to bf16, each peer's calls made on that row's input; fewer calls a graph from 4096 tokens on; none at 0 s."""
    from benchmarks import decode

    seen = []

    def turns(peers, calls, seconds):
        got = {name: [fn() for fn in fns] for name, fns in peers.items()}  # each call returns its input
        seen.append((got, calls, seconds))
        return {"bf16": 600.0, "int8_token": 400.0 if got["bf16"] == ["x1024", "x1024"] else 1500.0}

    monkeypatch.setattr(decode, "sustained_turns", turns)
    peers = {"bf16": [lambda x: x, lambda x: x], "int8_token": [lambda x: x]}
    rows = [{"M": m} for m in (256, 1024, 4096)]
    inputs = {256: "x256", 1024: "x1024", 4096: "x4096"}
    decode.sustained_rows(rows, peers, inputs, 1.5)
    assert [(got["int8_token"], calls, s) for got, calls, s in seen] == [(["x1024"], 8, 1.5), (["x4096"], 4, 1.5)]
    assert "sustained_us" not in rows[0]
    assert rows[1]["sustained_vs_bf16"] == {"int8_token": 1.5} and rows[1]["sustained_s"] == 1.5
    assert rows[2]["sustained_vs_bf16"] == {"int8_token": 0.4}
    assert "mlp M=  1024 sustained bf16    600.0  int8_token    400.0  | sustained x1.50" in capsys.readouterr().out
    seen.clear()
    fresh = [{"M": 1024}]
    decode.sustained_rows(fresh, peers, inputs, 0)
    assert seen == [] and fresh == [{"M": 1024}]


def test_sustained_us_sizes_its_blocks_from_one_replay_and_times_per_call(monkeypatch):
    """``timing.sustained_us`` with a fake graph and events: blocks of about ``block_ms`` of replays (one replay
    of 2 ms -> 5 a block of 10 ms), each block's time per call; with no seconds to run, one block."""
    from benchmarks import timing

    replays = []

    class Graph:
        def replay(self):
            replays.append(1)

    elapsed = iter([2.0, 40.0])  # ms: the replay that sizes the blocks, then the one block

    class Event:
        def __init__(self, enable_timing):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return next(elapsed)

    holds = []
    monkeypatch.setattr(timing, "captured", lambda fns, calls: Graph())
    monkeypatch.setattr(timing.torch.cuda, "Event", Event)
    monkeypatch.setattr(timing.torch.cuda, "_sleep", holds.append)
    assert timing.sustained_us(["f"], calls=8, seconds=0.0) == 1000.0  # 40 ms over 5 replays of 8 calls
    assert len(replays) == 1 + 5
    assert holds == [timing.HOLD_CYCLES]  # before the sizing replay's start event; the blocks run without a pause
    replays.clear()
    elapsed = iter([0.0, 10.0])  # a timer that reads 0: one replay taken as 1 us, 10000 replays a block
    assert timing.sustained_us(["f"], calls=1, seconds=0.0) == 1.0
    assert len(replays) == 1 + 10000


def test_settled_median_leaves_out_the_first_third():
    from benchmarks.timing import settled_median

    assert settled_median([300.0, 310.0, 320.0, 340.0, 345.0, 350.0]) == 342.5  # of 320, 340, 345, 350
    assert settled_median([300.0, 340.0]) == 320.0  # two blocks: the first third is none of them
    assert settled_median([333.0]) == 333.0


def test_mlp_plot_draws_the_sustained_replays_beside_the_graph_line(tmp_path, monkeypatch):
    """``decode.plot_mlp``: a dotted line per key where rows have sustained replays, in the graph panel only; a file
    without them draws as before."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from benchmarks import decode

    rows = [{"M": m, "graph_vs_bf16": {"fp8_token": 1.8, "int8_token": 1.5}, "eager_vs_bf16": {"fp8_token": 1.7,
            "int8_token": 1.4}} for m in (256, 1024, 4096)]
    for row in rows[1:]:
        row["sustained_vs_bf16"] = {"fp8_token": 1.78, "int8_token": 1.77}
    drawn = {}
    save = plt.Figure.savefig

    def keep(fig, *args, **kwargs):
        drawn["labels"] = [[ln.get_label() for ln in ax.get_lines()] for ax in fig.axes]
        drawn["sustained"] = [ln.get_xdata().tolist() for ln in fig.axes[0].get_lines()
                              if ln.get_label().endswith("(sustained)")]
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    assert decode.plot_mlp({"rows": rows}, str(tmp_path / "mlp.png"))
    graph, eager = drawn["labels"]
    assert "int8_token (sustained)" in graph and "fp8_token (sustained)" in graph
    assert not any(label.endswith("(sustained)") for label in eager)
    assert drawn["sustained"] == [[1024, 4096], [1024, 4096]]
    assert decode.plot_mlp({"rows": [{k: v for k, v in r.items() if k != "sustained_vs_bf16"} for r in rows]},
                           str(tmp_path / "plain.png"))
    assert not any(label.endswith("(sustained)") for label in drawn["labels"][0])
    assert (tmp_path / "mlp.png").stat().st_size > 1000
    # the replays after a foreign kernel: a dashed line per key, in the graph panel only
    for row in rows:
        row["graph_after_foreign_vs_bf16"] = {"fp8_token": 1.75, "int8_token": 1.45}
    assert decode.plot_mlp({"rows": rows}, str(tmp_path / "after.png"))
    graph, eager = drawn["labels"]
    assert "fp8_token (after a foreign kernel)" in graph and "int8_token (after a foreign kernel)" in graph
    assert not any("foreign" in label for label in eager)


def test_gemm_plot_draws_ours_after_a_foreign_kernel_where_the_run_timed_it(tmp_path, monkeypatch):
    """``decode.plot_gemm``: each panel's peers, and ours after a foreign kernel (dashed) where rows have it."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from benchmarks import decode

    rows = [{"shape": "o", "kind": kind, "M": m, "N": 64, "K": 32, "weight_TBps": {"ours": 2.0, "bf16": 1.0},
             "weight_TBps_after_foreign": {"ours": 1.8}} for kind in ("fp8", "int8") for m in (1, 16)]
    drawn = []
    save = plt.Figure.savefig
    monkeypatch.setattr(plt.Figure, "savefig", lambda fig, *a, **k: drawn.append(
        [[ln.get_label() for ln in ax.get_lines()] for ax in fig.axes]) or save(fig, *a, **k))
    assert decode.plot_gemm({"rows": rows, "ceiling_GBps": 3000.0}, str(tmp_path / "gemm.png"))
    assert all("ours after a foreign kernel" in labels and "ours" in labels for labels in drawn[-1])
    for row in rows:
        del row["weight_TBps_after_foreign"]
    assert decode.plot_gemm({"rows": rows, "ceiling_GBps": 3000.0}, str(tmp_path / "plain.png"))
    assert not any("ours after a foreign kernel" in labels for labels in drawn[-1])


def test_graph_us_is_the_median_replay_per_call(monkeypatch):
    """``timing.graph_us`` with a fake graph and events: each replay between its start and end events, the median
    replay's time over the graph's calls."""
    from benchmarks import timing

    order = []

    class Graph:
        def replay(self):
            order.append("replay")

    class Event:
        def __init__(self, enable_timing):
            pass

        def record(self):
            order.append("record")

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return next(elapsed)

    elapsed = iter([1.6, 0.8, 2.4])  # ms per replay of 16 calls
    monkeypatch.setattr(timing, "captured", lambda fns, calls: Graph())
    monkeypatch.setattr(timing.torch.cuda, "Event", Event)
    monkeypatch.setattr(timing.torch.cuda, "_sleep", lambda cycles: order.append(("hold", cycles)))
    assert timing.graph_us(["f"], calls=16, replays=3) == 100.0  # the median replay, 1.6 ms over 16 calls
    # the stream held busy before each start event: the host's launch of the graph falls outside the window
    assert order == [("hold", timing.HOLD_CYCLES), "record", "replay", "record"] * 3


SCRIPTS = {"tune_act_quant": [], "tune_act_quant_decode": [], "fp8_gemm_accumulation": [],
           "hip_w8a8_token": ["--out", "OUT"], "profile_host": [], "trace_mlp": ["--out", "OUT"],
           "sweep_small_m_gemm": ["--out", "OUT"], "sweep_int8_gemm": ["--out", "OUT"],
           "quantizing_calls": ["--out", "OUT"]}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_gpu_scripts_have_help_and_refuse_a_node_without_a_gpu(script, tmp_path):
    """Each GPU script of benchmarks/ answers --help (before, some took it for a token count or ran) and, on a node
    whose torch sees no GPU, says so in one line and exits 2 before it makes anything."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    run = lambda *args: subprocess.run([sys.executable, "-m", f"benchmarks.{script}", *args], capture_output=True,  # noqa: E731
                                       text=True, env=env, cwd=Path(__file__).resolve().parent.parent)
    helped = run("--help")
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: python -m benchmarks.{script}")
    out = tmp_path / "out"
    refused = run(*[str(out) if a == "OUT" else a for a in SCRIPTS[script]])
    assert refused.returncode == 2 and refused.stderr == f"{script}: needs a GPU (torch.cuda.is_available() is False)\n"
    assert not out.exists()


@pytest.mark.parametrize("argv, said", [(["tune_act_quant", "0"], "argument m: expected a whole number >= 1, got '0'"),
                                        (["profile_host", "--top", "-1"], "--top: expected a count of rows >= 1, got '-1'"),
                                        (["hip_w8a8_token"], "the following arguments are required: --out"),
                                        (["trace_mlp"], "the following arguments are required: --out")])
def test_the_gpu_scripts_refuse_bad_flags_in_one_line(argv, said):
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{argv[0]}", *argv[1:]], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("script, argv, said", [
    ("quantizing_calls", ["--ms", "3"], "--ms: expected token counts >= 1 separated by commas, each one of 1, 2, 4, 8, "
                                        "16, got '3'"),
    ("quantizing_calls", ["--kinds", "int8,bogus"], "--kinds takes int8 and fp8, separated by commas"),
    ("quantizing_calls", ["--kinds", "fp8", "--install"], "--install merges the int8 rows' configs"),
    ("quantizing_calls", ["--own-rows"], "--own-rows goes with --install"),
    ("sweep_int8_gemm", ["--ms", "abc"], "--ms: expected token counts >= 1 separated by commas (like 1,16,224), "
                                      "got 'abc'"),
    ("sweep_int8_gemm", ["--ms", "0,-5"], "--ms: expected token counts >= 1 separated by commas (like 1,16,224), "
                                       "got '0' in '0,-5'"),
    ("sweep_int8_gemm", ["--ms", "1," + "9" * 19], "--ms: expected token counts >= 1 of at most 18 digits separated "
                                                 f"by commas (like 1,16,224), got '{'9' * 19}' in '1,{'9' * 19}'"),
    ("sweep_int8_gemm", ["--replot", "nowhere.json"], "--replot nowhere.json cannot be read"),
    ("sweep_int8_gemm", ["--replot", "EMPTY"], "is not an int8_gemm_sweep.json this script writes"),
])
def test_the_sweeps_check_their_flags_before_the_gpu(script, argv, said, tmp_path, capsys, monkeypatch):
    """Token counts a table never reads, unknown kinds, an install with nothing to install and a saved sweep that
    is not one: one line and exit 2, before the GPU check (a traceback, or a refusal only after the GPU work)."""
    import importlib

    empty = tmp_path / "empty.json"
    empty.write_text('{"rows": []}')
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(f"benchmarks.{script}")
    with pytest.raises(SystemExit) as stop:
        module.main(["--out", str(tmp_path / "out"), *[str(empty) if a == "EMPTY" else a for a in argv]])
    assert stop.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_sweep_int8_gemm_keeps_the_rows_it_timed_when_a_run_stops(tmp_path, monkeypatch, capsys):
    """The JSON was written only at the end: a run stopped part-way (a config whose bits differ, a killed process)
    lost every row. Each row now lands in int8_gemm_sweep.partial.json as it is timed."""
    from benchmarks import sweep_int8_gemm as s

    def stopped(ms, shapes, log, saved):
        log("o M=512: timed")
        log.quiet("o M=512 config y: 12.5 us")
        saved([{"shape": "o", "M": 512}])
        raise SystemExit("o M=1024 config x: output differs from the installed config's")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "a GPU")
    monkeypatch.setattr(s.g, "int8_gemm_rows", lambda index: "its rows")
    monkeypatch.setattr(timing, "versions", lambda: {"device": "a GPU"})
    monkeypatch.setattr(s, "sweep", stopped)
    with pytest.raises(SystemExit, match="output differs"):
        s.main(["--out", str(tmp_path), "--shapes", "o"])
    kept = json.loads((tmp_path / "int8_gemm_sweep.partial.json").read_text())
    assert kept == {"versions": {"device": "a GPU"}, "rows": [{"shape": "o", "M": 512}]}
    assert not (tmp_path / "int8_gemm_sweep.json").exists()
    # the log keeps each line as it was logged, the quiet one too; only the other one was printed
    assert (tmp_path / "int8_gemm_sweep.log").read_text().splitlines()[1:] == ["o M=512: timed",
                                                                               "o M=512 config y: 12.5 us"]
    assert "config y" not in capsys.readouterr().out


def test_quantizing_calls_keeps_the_rows_it_timed_when_a_run_stops(tmp_path, monkeypatch):
    """A bit mismatch raises mid-run: the rows timed before it stay in quantizing_calls.partial.json."""
    from benchmarks import quantizing_calls as q

    def stopped(kinds, shapes, ms, log, saved):
        saved([{"kind": "int8", "shape": "o", "m": 1}])
        raise RuntimeError("int8 o M=2: x quantizing differs from the producer then the GEMM")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(timing, "versions", lambda: {"device": "a GPU"})
    monkeypatch.setattr(q, "run", stopped)
    with pytest.raises(RuntimeError, match="quantizing differs"):
        q.main(["--out", str(tmp_path), "--kinds", "int8"])
    kept = json.loads((tmp_path / "quantizing_calls.partial.json").read_text())
    assert kept == {"versions": {"device": "a GPU"}, "rows": [{"kind": "int8", "shape": "o", "m": 1}]}
    assert not (tmp_path / "quantizing_calls.json").exists()


def test_an_out_folder_that_cannot_be_written_to_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """A read-only folder (or one of another user) took the benchmarks' minutes, then lost their results to a
    traceback at the first JSON file: it is refused before anything runs."""
    from benchmarks import bench, decode

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(decode, "bench_mlp", lambda quick: pytest.fail("ran into a folder it cannot write to"))

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(bench.tempfile, "TemporaryFile", read_only)  # a root test process may write anywhere
    out = tmp_path / "ro"
    out.mkdir()
    assert cli.main(["bench", "mlp", "--quick", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"bench: --out {out} cannot be written to: Permission denied"]


def test_a_json_file_that_cannot_be_written_goes_to_stdout_and_the_run_exits_74(tmp_path, capsys, monkeypatch):
    """A folder named gemm.json under --force (or a full disk) failed with a traceback after the run, its results
    lost: the JSON goes to stdout, one line says why, the other files are still written, and the exit status is
    every command's for output it cannot write (it was 2, a bad flag's)."""
    from benchmarks import decode

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(decode, "bench_gemm", lambda quick: {"versions": {"device": "test"}, "rows": [], "mark": 7})
    monkeypatch.setattr(decode, "bench_mlp", lambda quick: {"versions": {"device": "test"}, "rows": [], "mark": 8})
    monkeypatch.setattr(decode, "bench_host", lambda quick: {"versions": {"device": "test"}, "us_per_call": {}})
    for plot in ("plot_gemm", "plot_mlp"):
        monkeypatch.setattr(decode, plot, lambda result, path: False)
    (tmp_path / "gemm.json").mkdir()
    monkeypatch.setattr("benchmarks.bench._act_quant_unavailable", lambda: "not here")
    assert cli.main(["bench", "all", "--quick", "--out", str(tmp_path), "--force"]) == flags.OUTPUT_FAILED == 74
    captured = capsys.readouterr()
    assert f"bench: cannot write {tmp_path / 'gemm.json'}: Is a directory; its JSON follows on stdout" in captured.err
    assert '"mark": 7' in captured.out
    assert json.loads((tmp_path / "mlp.json").read_text())["mark"] == 8 and (tmp_path / "host.json").is_file()


def test_a_disabled_gemm_name_that_disables_nothing_is_warned_by_bench_too(tmp_path, capsys, monkeypatch):
    """A misspelt FUSED_QUANT_DISABLED_GEMMS entry was warned by probe and selftest, and by nothing under bench
    (every command runs with the library's own warning silenced): bench prints the same warning line."""
    from benchmarks import decode

    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "scaled_mm_fp9")
    fused_quant.reset()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(decode, "bench_host", lambda quick: {"versions": {"device": "test"}, "us_per_call": {}})
    assert cli.main(["bench", "host", "--quick", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    told = [line for line in out if line.startswith("bench: warning: ")]
    assert len(told) == 1 and "scaled_mm_fp9" in told[0], out


def test_tree_names_the_checkouts_commit_and_nothing_outside_one(tmp_path, monkeypatch):
    """versions() records the tree a result came from, so that the report can refuse a table over two trees."""
    head = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode:
        pytest.skip(f"the package does not run from a git checkout here: {head.stderr.strip()}")
    diff = subprocess.run(["git", "-C", str(CHECKOUT), "diff", "HEAD", "--no-ext-diff", "--binary"],
                          capture_output=True).stdout
    assert timing.tree() == head.stdout.strip() + (f"+changes-{hashlib.sha1(diff).hexdigest()[:10]}" if diff else "")
    monkeypatch.setattr(fused_quant, "__file__", str(tmp_path / "site-packages" / "fused_quant" / "__init__.py"))
    assert timing.tree() is None
    # a wheel installed in a venv inside another project's checkout: that checkout is not the package's tree
    project = tmp_path / "project"
    package = project / ".venv" / "site-packages" / "fused_quant"
    package.mkdir(parents=True)
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", "-C", str(project), *args], check=True, env={**os.environ, **git})
    monkeypatch.setattr(fused_quant, "__file__", str(package / "__init__.py"))
    assert timing.tree() is None
