"""Central skips (markers gpu, two_gpus, one per backend of the backend table, interpreter, vllm) and shared
fixtures.

Skip reasons name the missing capability. When ``TRITON_INTERPRET=1`` the
interpreter shim is installed before any kernel module is imported.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"

# Test tensors are small: intra-op threads only add contention (on a loaded 2-core node a
# 65,536-element op took 2-8 ms with 2 threads and 0.02 ms with 1).
torch.set_num_threads(1)

if INTERPRETING:
    from tests.triton_interpreter_shim import install as _install_shim

    _install_shim()


def _gpu_reason() -> str | None:
    if not torch.cuda.is_available():
        return "needs a GPU: torch.cuda.is_available() is False on this machine"
    return None


def _two_gpus_reason() -> str | None:
    count = torch.cuda.device_count()  # 0 where CUDA is not available
    return f"needs two GPUs: this machine has {count}" if count < 2 else None


def _backend_reason(name: str) -> str | None:
    from fused_quant.selection import select_backend
    from fused_quant.platforms import probe
    from fused_quant.validation import BackendUnavailableError

    try:
        select_backend(probe(), name)
    except BackendUnavailableError as exc:
        return str(exc)
    return None


def _markers() -> tuple[str, ...]:
    """The markers skipped centrally: gpu, two_gpus, one per backend of the backend table, interpreter, vllm."""
    from fused_quant.selection import BACKENDS

    return ("gpu", "two_gpus", *BACKENDS, "interpreter", "vllm")


def pytest_collection_modifyitems(config, items):
    from fused_quant.selection import BACKENDS

    cache: dict[str, str | None] = {}

    def reason(marker: str) -> str | None:
        if marker not in cache:
            if marker == "gpu":
                cache[marker] = _gpu_reason()
            elif marker == "two_gpus":
                cache[marker] = _two_gpus_reason()
            elif marker in BACKENDS:  # a backend that needs a device: that device, and the backend able to run
                cache[marker] = None if BACKENDS[marker].any_device else (_gpu_reason() or _backend_reason(marker))
            elif marker == "interpreter":
                if importlib.util.find_spec("triton") is None:
                    cache[marker] = "needs triton installed (pip install fused-quant[triton])"
                elif not INTERPRETING:
                    cache[marker] = "needs TRITON_INTERPRET=1 (ci row cpu-triton-interpreter)"
                else:
                    cache[marker] = None
            elif marker == "vllm":
                cache[marker] = None if importlib.util.find_spec("vllm") else "needs vLLM installed"
            else:
                cache[marker] = None
        return cache[marker]

    markers = _markers()
    for item in items:
        for marker in markers:
            if marker in item.keywords:
                why = reason(marker)
                if why:
                    item.add_marker(pytest.mark.skip(reason=why))
                    break


@pytest.fixture
def backend_env(monkeypatch):
    """Set FUSED_QUANT_BACKEND for one test and re-select; restores the selection afterwards."""
    from fused_quant.selection import reset_current_backend

    def set_backend(name: str):
        monkeypatch.setenv("FUSED_QUANT_BACKEND", name)
        reset_current_backend()

    yield set_backend
    monkeypatch.delenv("FUSED_QUANT_BACKEND", raising=False)
    reset_current_backend()


@pytest.fixture
def torch_backend(backend_env):
    """Select the pure-torch backend whatever the node would pick (modules that test it use it
    for every test: ``pytest.mark.usefixtures("torch_backend")``)."""
    backend_env("torch")


@pytest.fixture(autouse=True)
def _fresh_runtime_state():
    """Launch plans, validated calls and provider choices are cached in the runtime state; tests that
    patch heuristics, producers or the platform must not see (nor leave behind) another test's."""
    from fused_quant import runtime

    runtime.reset()
    yield
    runtime.reset()


@pytest.fixture
def gpu_device() -> torch.device:
    return torch.device("cuda")
