"""Backend table, the pure ``select_backend(info, env)`` and the cached ``current_backend()``.

Preference in auto mode: NVIDIA SM90+ -> ``triton_fp8``; AMD / Hygon ->
``hip_w8a8``; otherwise ``torch``. When the preferred backend cannot run, auto
falls back to ``torch`` and the reason says why; an explicit choice that is
unknown or cannot run raises ``BackendUnavailableError``, never falls back.
"""

from __future__ import annotations

import importlib
import logging
import threading

import torch

from fused_quant import envs
from fused_quant.backends import fallback, hip_w8a8, triton_fp8
from fused_quant.backends.base import Backend, SelectedBackend
from fused_quant.platforms.info import PlatformInfo
from fused_quant.validation import BackendUnavailableError

logger = logging.getLogger("fused_quant")

BACKENDS: dict[str, Backend] = {b.name: b for b in (fallback.BACKEND, triton_fp8.BACKEND, hip_w8a8.BACKEND)}
TORCH = fallback.BACKEND.name


def preferred_backend(info: PlatformInfo) -> str:
    """The backend auto mode wants for this platform, before availability."""
    if info.vendor == "nvidia":
        return triton_fp8.BACKEND.name
    if info.vendor in ("amd", "hygon"):
        return hip_w8a8.BACKEND.name
    return TORCH


def select_backend(info: PlatformInfo, env: str | None = "auto") -> tuple[str, str]:
    """(backend name, reason) for ``info`` and a FUSED_QUANT_BACKEND value; pure."""
    requested = (env or "auto").strip().lower()
    if requested == "auto":
        want = preferred_backend(info)
        ok, why = BACKENDS[want].is_available(info)
        if ok:
            return want, f"auto: {why}"
        return TORCH, f"auto: {why}; using torch"
    if requested not in BACKENDS:
        raise BackendUnavailableError(
            f"FUSED_QUANT_BACKEND={requested!r} is not a backend; valid names: auto, {', '.join(BACKENDS)}"
        )
    ok, why = BACKENDS[requested].is_available(info, explicit=True)
    if not ok:
        raise BackendUnavailableError(
            f"FUSED_QUANT_BACKEND={requested} cannot run here: {why} "
            f"(valid names: auto, {', '.join(BACKENDS)}; platform: {info.reason})"
        )
    return requested, f"FUSED_QUANT_BACKEND={requested}: {why}"


_lock = threading.Lock()
_current: SelectedBackend | None = None
_loaded: set[str] = set()


def current_backend() -> SelectedBackend:
    """The selected backend for this process (probe + env, decided once and cached)."""
    global _current
    if _current is None:
        with _lock:
            if _current is None:
                from fused_quant.platforms import current_platform

                requested = envs.backend()
                name, reason = select_backend(current_platform(), requested)
                _current = SelectedBackend(BACKENDS[name], reason, requested)
                if requested == "auto" and name == TORCH and preferred_backend(current_platform()) != TORCH:
                    logger.warning("fused-quant: %s", reason)
                else:
                    logger.info("fused-quant backend %s (%s)", name, reason)
    return _current


def reset_current_backend() -> None:
    """Forget the cached selection (after changing FUSED_QUANT_BACKEND in-process)."""
    global _current
    from fused_quant.gemm import clear_gemm_selection_cache
    from fused_quant.registry import clear_call_cache

    with _lock:
        _current = None
    clear_gemm_selection_cache()
    clear_call_cache()


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; valid names: {', '.join(BACKENDS)}"
        ) from None


def load_backends() -> None:
    """Import every backend's registration modules (idempotent; no device work).

    Under torch.compile this is a no-op: ``registry.current_backend_name`` (a graph
    constant, run for real at trace time) has loaded them already.
    """
    if len(_loaded) == len(BACKENDS) or torch.compiler.is_compiling():
        return
    for backend in BACKENDS.values():
        if backend.name in _loaded:
            continue
        for module in backend.modules:
            importlib.import_module(module)
        _loaded.add(backend.name)
