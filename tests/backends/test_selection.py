"""Backend selection is a pure function of (PlatformInfo, env): every platform is testable here."""

from __future__ import annotations

import pytest
import torch

from fused_quant.selection import (BACKENDS, Backend, current_backend, preferred_backend, reset_current_backend,
                                   select_backend)
from fused_quant.platforms.info import PlatformInfo, fp8_dtype_for, sm_at_least
from fused_quant.validation import BackendUnavailableError


def nvidia(arch, triton="3.6.0", build="cuda 13.0"):
    return PlatformInfo("nvidia", arch, "GPU", 1, fp8_dtype_for("nvidia", arch), True, build, "fake", triton)


def amd(vendor, arch, triton="3.6.0", build="hip 6.4"):
    fp8 = fp8_dtype_for(vendor, arch)
    return PlatformInfo(vendor, arch, "GPU", 8, fp8, fp8 is not None, build, "fake", triton)


CPU = PlatformInfo("cpu", None, None, 0, torch.float8_e4m3fn, True, "cpu", "fake", "3.7.1")

AUTO = [  # (platform, expected backend, words the reason must contain)
    (nvidia("sm_80"), "torch", "SM90+"),
    (nvidia("sm_89"), "torch", "SM90+"),
    (nvidia("sm_90"), "triton_fp8", "sm_90"),
    (nvidia("sm_100"), "triton_fp8", "sm_100"),
    (nvidia("sm_90", triton=None), "torch", "triton"),
    (nvidia("sm_90", build="cpu"), "torch", "CUDA build"),
    (nvidia(None), "torch", "nvidia-ml-py"),
    (amd("amd", "gfx90a"), "hip_w8a8", "gfx90a"),
    (amd("amd", "gfx942"), "hip_w8a8", "gfx942"),
    (amd("amd", "gfx950"), "hip_w8a8", "gfx950"),
    (amd("hygon", "gfx936"), "hip_w8a8", "hygon"),
    (amd("hygon", "gfx928"), "hip_w8a8", "hygon"),
    (amd("amd", "gfx942", triton=None), "torch", "triton"),
    (amd("hygon", "gfx928", build="cpu"), "torch", "ROCm"),
    (CPU, "torch", "torch runs on every device"),
]


@pytest.mark.parametrize("info,want,words", AUTO, ids=lambda v: getattr(v, "arch", None) or str(v))
def test_auto_selection(info, want, words):
    name, reason = select_backend(info, "auto")
    assert name == want
    assert words in reason
    assert reason.startswith("auto:")
    # the pure-torch backend's own reason says nothing of the node: the node's summary follows it where torch is
    # the node's own backend (a fallback's reason already says why the node's backend cannot run)
    assert reason.endswith(f"; {info.summary()}") == (name == "torch" and "using torch" not in reason), reason


@pytest.mark.parametrize("info,name", [(nvidia("sm_90"), "triton_fp8"), (nvidia("sm_100"), "triton_fp8"),
                                       (nvidia("sm_90"), "hip_w8a8"), (amd("amd", "gfx942"), "hip_w8a8"),
                                       (CPU, "torch"), (nvidia("sm_80"), "torch"), (nvidia(None), "triton_fp8")])
def test_explicit_override_that_can_run(info, name):
    got, reason = select_backend(info, name)
    assert got == name and reason.startswith(f"FUSED_QUANT_BACKEND={name}")
    assert reason.endswith(f"; {info.summary()}") == (name == "torch"), reason  # torch by name: the node too


@pytest.mark.parametrize("info,name,words", [
    (CPU, "triton_fp8", "NVIDIA GPU"),
    (CPU, "hip_w8a8", "AMD or Hygon"),
    (nvidia("sm_89"), "triton_fp8", "SM90+"),
    (amd("amd", "gfx942"), "triton_fp8", "NVIDIA GPU"),
    (nvidia("sm_90", triton=None), "hip_w8a8", "triton"),
])
def test_explicit_override_that_cannot_run_raises_with_reason(info, name, words):
    with pytest.raises(BackendUnavailableError) as exc:
        select_backend(info, name)
    msg = str(exc.value)
    others = ", ".join(n for n in ("auto", "torch", "triton_fp8", "hip_w8a8") if n != name)
    assert words in msg and f"(the other names: {others}; platform: " in msg  # not "valid names" with its own


@pytest.mark.parametrize("value", ["nope", "cuda", "TRITON"])
def test_unknown_name_lists_valid_names(value):
    with pytest.raises(BackendUnavailableError, match="valid names: auto, torch, triton_fp8, hip_w8a8"):
        select_backend(CPU, value)


def test_names_are_case_and_space_insensitive():
    assert select_backend(CPU, " Torch ")[0] == "torch"
    assert select_backend(CPU, None)[0] == "torch"


def test_preference_order():
    assert preferred_backend(nvidia("sm_80")) == "triton_fp8"  # preferred, then found unavailable
    assert preferred_backend(amd("hygon", "gfx936")) == "hip_w8a8"
    assert preferred_backend(CPU) == "torch"
    assert set(BACKENDS) == {"torch", "triton_fp8", "hip_w8a8"}


def test_env_override_is_read_when_selecting(monkeypatch):
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "torch")
    reset_current_backend()
    try:
        assert current_backend().name == "torch" and current_backend().requested == "torch"
        monkeypatch.setenv("FUSED_QUANT_BACKEND", "bogus")
        assert current_backend().name == "torch", "selection is cached until reset"
        reset_current_backend()
        with pytest.raises(BackendUnavailableError, match="bogus"):
            current_backend()
    finally:
        monkeypatch.delenv("FUSED_QUANT_BACKEND")
        reset_current_backend()


def test_fp8_dtype_per_arch():
    assert fp8_dtype_for("nvidia", "sm_90") == torch.float8_e4m3fn
    assert fp8_dtype_for("nvidia", "sm_80") is None
    assert fp8_dtype_for("amd", "gfx942") == torch.float8_e4m3fnuz
    assert fp8_dtype_for("amd", "gfx942:sramecc+:xnack-") == torch.float8_e4m3fnuz
    assert fp8_dtype_for("amd", "gfx950") == torch.float8_e4m3fn
    assert fp8_dtype_for("amd", "gfx90a") is None


def test_sm_at_least_compares_nvidia_archs_only():
    """One rule for every minimum compute capability (FP8, PDL, the TMA): ``sm_XY`` against (X, Y), nothing else."""
    assert sm_at_least("sm_90", (9, 0)) and sm_at_least("sm_100", (9, 0)) and sm_at_least("sm_89", (8, 9))
    assert not sm_at_least("sm_89", (9, 0)) and not sm_at_least("sm_80", (8, 9))
    assert not any(sm_at_least(arch, (0, 0)) for arch in ("gfx942", "gfx950", None, "", "sm_x"))


def test_an_any_device_backend_s_reason_names_it():
    """A backend of the user's that runs on every device is named in its reason (it read "pure torch" for any)."""
    mine = Backend("mybackend", "reference producers and an exact int8 GEMM", "mypkg", "any device", any_device=True)
    assert mine.is_available(CPU) == (True, "mybackend runs on every device")
    assert BACKENDS["torch"].is_available(CPU) == (True, "torch runs on every device")
