"""The ``torch`` backend never needs Triton: a process that cannot import triton runs every producer,
``quantize``, ``QuantLinear`` and the HCU surface, bitwise equal to the reference (tests/pure_torch_run.py),
on the CPU here and on CUDA tensors in the GPU rows (auto selection must then pick torch and say why)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(device: str, backend_env: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FUSED_QUANT_BACKEND", "TRITON_INTERPRET")}
    if backend_env is not None:
        env["FUSED_QUANT_BACKEND"] = backend_env
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "tests.pure_torch_run", device], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.torch
@pytest.mark.parametrize("backend_env", [None, "torch"])
def test_torch_backend_without_triton_on_cpu(backend_env):
    r = _run("cpu", backend_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "triton never imported" in r.stdout


@pytest.mark.gpu
@pytest.mark.torch
@pytest.mark.parametrize("backend_env", [None, "torch"])
def test_torch_backend_without_triton_on_cuda_tensors(backend_env):
    """Auto mode on a GPU node whose triton cannot be imported picks torch (the reason names triton)."""
    r = _run("cuda", backend_env)
    assert r.returncode == 0, r.stdout + r.stderr
    if backend_env is None:
        assert "auto:" in r.stdout and "triton" in r.stdout.splitlines()[0], r.stdout
    assert "triton never imported" in r.stdout


def test_a_blocked_triton_counts_as_not_installed():
    """The probe reads triton's version from metadata, but a module that cannot be found (a broken
    install, or a process that blocked it) is no triton: auto selection then falls back to torch."""
    from fused_quant.platforms.probe import installed_triton_version

    assert installed_triton_version(lambda dist: "3.7.1", lambda name: None) is None
    assert installed_triton_version(lambda dist: "3.7.1", lambda name: object()) == "3.7.1"

    def broken(name):
        raise ValueError("triton.__spec__ is None")

    assert installed_triton_version(lambda dist: "3.7.1", broken) is None
