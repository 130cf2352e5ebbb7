"""Shared by the CLI tests (test_cli*.py, test_bench_*.py): the command in a subprocess, fake nodes, benchmarks
recorded."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fused_quant import envs, runtime
from fused_quant.platforms import PlatformInfo

probe_module = importlib.import_module("fused_quant.platforms.probe")  # the package exports probe(), the function

H200 = PlatformInfo("nvidia", "sm_90", "NVIDIA H200", 8, torch.float8_e4m3fn, True, "cuda 12.8",
                    "NVML: 8 x NVIDIA H200, compute capability 9.0; torch cuda 12.8", "3.5.1")


# the files the decode benchmarks wrote on an H200 (benchmarks/RESULTS.md, thirty-first round, run 2)
ROUND31 = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "round31"
RECORDED = {"bench_gemm": ROUND31 / "run2_gemm.json", "bench_host": ROUND31 / "run2_host1.json",
            "bench_mlp": ROUND31 / "run2_mlp.json"}


def run_cli(*args, env=None):
    """``python -m fused_quant ARGS``; no inherited FUSED_QUANT_* variable leaks in (a test that needs one passes it)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FUSED_QUANT_")} | (env or {})
    return subprocess.run([sys.executable, "-m", "fused_quant", *args], capture_output=True, text=True, env=full_env)


@pytest.fixture
def node(monkeypatch):
    """``node(info, gpus=0)``: the probe sees ``info`` and torch counts ``gpus`` CUDA devices from now on
    (no FUSED_QUANT_* variable set; conftest resets the runtime state after the test)."""
    for name in envs.VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def on(info: PlatformInfo, gpus: int = 0):
        monkeypatch.setattr(probe_module, "_probe_now", lambda: info)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        runtime.reset()  # probe again, select again

    return on


def record_benchmarks(monkeypatch) -> dict:
    """Replace ``fused-quant bench``'s four benchmarks and plots with recorders, as if a GPU were there: returns the
    dict that takes each benchmark's name -> the keyword arguments it was called with."""
    from benchmarks import bench, decode

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "_act_quant_unavailable", lambda: "")  # an SM90+ NVIDIA GPU's triton_fp8
    seen = {}

    def recorder(name):
        def run(quick, **kw):
            seen[name] = kw
            recorded = RECORDED.get(name)  # what the decode benchmarks wrote on an H200, for the targets table
            return json.loads(recorded.read_text()) if recorded else {"rows": []}
        return run

    for module, name in ((bench, "bench_act_quant"), (decode, "bench_gemm"), (decode, "bench_host"),
                         (decode, "bench_mlp")):
        monkeypatch.setattr(module, name, recorder(name))
    for module, plot in ((bench, "plot_act_quant"), (decode, "plot_gemm"), (decode, "plot_mlp")):
        monkeypatch.setattr(module, plot, lambda result, path: False)
    return seen
