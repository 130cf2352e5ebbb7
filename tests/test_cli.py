"""The operator's commands: probe (human and --json, non-zero for an impossible override) and
selftest (passes on the torch backend, fails loudly when a producer is wrong)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from fused_quant import cli


def run_cli(*args, env=None):
    # the inherited FUSED_QUANT_BACKEND never leaks in; a test that needs one passes it
    full_env = {k: v for k, v in os.environ.items() if k != "FUSED_QUANT_BACKEND"} | (env or {})
    return subprocess.run([sys.executable, "-m", "fused_quant", *args], capture_output=True, text=True, env=full_env)


def test_probe_names_the_torch_backend_and_why():
    r = run_cli("probe")
    assert r.returncode == 0, r.stderr
    assert "backend  : torch" in r.stdout and "pure torch" in r.stdout
    assert "producers[triton_fp8]" in r.stdout and "silu_and_mul -> int8_dynamic_token" in r.stdout


def test_probe_json():
    r = run_cli("probe", "--json")
    report = json.loads(r.stdout)
    assert report["platform"]["vendor"] == "cpu"
    assert report["backend"]["name"] == "torch"
    assert "relu2 -> fp8_static_tensor" in report["producers"]["torch"]
    assert "torch_int8_f64 (int8)" in report["gemm_providers"]["torch"]


def test_probe_with_impossible_override_exits_nonzero_with_reason():
    r = run_cli("probe", env={"FUSED_QUANT_BACKEND": "triton_fp8"})
    assert r.returncode == 2
    assert "cannot run here" in r.stdout and "NVIDIA GPU" in r.stdout


def test_selftest_passes_on_torch_backend(capsys):
    assert cli.main(["selftest", "--backend", "torch"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "checks passed" in out
    assert "known answer" in out and "65,536" in out


def test_selftest_json(capsys):
    assert cli.main(["selftest", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and report["backend"] == "torch"
    assert len(report["checks"]) > 30


def test_selftest_unavailable_backend_exits_2(capsys):
    assert cli.main(["selftest", "--backend", "triton_fp8"]) == 2
    assert cli.main(["selftest", "--backend", "nope"]) == 2


def test_selftest_catches_a_wrong_producer(monkeypatch, capsys):
    """Known answers make selftest meaningful even though the torch backend is the reference."""
    from fused_quant import selftest

    real = selftest._run

    def off_by_one(act, x, key, scale, numerics, backend):
        q, s = real(act, x, key, scale, numerics, backend)
        if q.dtype == torch.int8:
            q = torch.where(q == 127, torch.full_like(q, 126), q)
        return q, s

    monkeypatch.setattr(selftest, "_run", off_by_one)
    assert cli.main(["selftest"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  known answer: silu_and_mul int8 per-token" in out


@pytest.mark.parametrize("argv", [["bench", "act_quant", "--quick"]])
def test_bench_without_gpu_says_so(argv, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(argv) == 2
    assert "needs a GPU" in capsys.readouterr().err
