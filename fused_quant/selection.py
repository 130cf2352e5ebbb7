"""The backend table, the pure ``select_backend(info, env)`` and the cached ``current_backend()``.

Each backend is one folder under ``fused_quant/backends/`` plus one row of ``BACKENDS``: what
it serves, as data (vendors auto mode prefers it on, the torch builds and packages it needs,
the lowest NVIDIA compute capability, vendors an explicit choice may force it on). Selection
reads the rows; no per-backend code. Auto mode takes the first row serving the node's vendor
and falls back to ``torch`` with the reason when that row cannot run here; an explicit choice
that is unknown or cannot run raises ``BackendUnavailableError``, never falls back.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass

from fused_quant import envs, runtime
from fused_quant.errors import BackendUnavailableError
from fused_quant.platforms.info import PlatformInfo
from fused_quant.tracing import graph_constant

logger = logging.getLogger("fused_quant")

FALLBACK = "torch"  # the pure-torch backend: runs everywhere, computes what other backends decline
# vendor -> (torch build prefix it needs, words for it)
_BUILDS = {"nvidia": ("cuda", "a CUDA build of torch"), "amd": ("hip", "a ROCm/DTK build of torch"),
           "hygon": ("hip", "a ROCm/DTK build of torch")}
# package a backend may need -> (is it there, per PlatformInfo), the pip extra that installs it
_PACKAGES = {"triton": (lambda info: info.triton_version, "triton")}


@dataclass(frozen=True)
class Backend:
    """One row of the backend table: a backend's name, folder and what it serves."""

    name: str  # == its FUSED_QUANT_BACKEND value == its pytest marker
    description: str
    package: str  # its folder; importing ``package.<module>`` for each of ``modules`` registers it
    hardware: str  # what it needs, in words ("an NVIDIA GPU (SM90+)")
    vendors: tuple[str, ...] = ()  # auto mode prefers it on these vendors
    any_device: bool = False  # pure torch: runs on every node
    needs: tuple[str, ...] = ()  # packages (keys of _PACKAGES)
    min_capability: tuple[int, int] | None = None  # NVIDIA compute capability
    forced_on: tuple[str, ...] = ()  # vendors where an explicit choice may run it too
    modules: tuple[str, ...] = ("producers", "gemms")

    def is_available(self, info: PlatformInfo, *, explicit: bool = False) -> tuple[bool, str]:
        """(ok, reason) for running on ``info``; ``explicit``: the user forced it by env."""
        if self.any_device:
            return True, f"{self.name} runs on every device"
        forced = info.vendor not in self.vendors
        if forced and not (explicit and info.vendor in self.forced_on):
            return False, f"{self.name} needs {self.hardware}; this node is {info.vendor}"
        build = _BUILDS.get(info.vendor)
        if build is not None and not info.torch_build.startswith(build[0]):
            return False, f"{self.name} needs {build[1]}; torch here is {info.torch_build}"
        for package in self.needs:
            present, extra = _PACKAGES[package]
            if present(info) is None:
                return False, f"{self.name} needs {package}; install fused-quant[{extra}]"
        if self.min_capability is not None and info.vendor == "nvidia" and not forced:
            need = f"SM{self.min_capability[0]}{self.min_capability[1]}+"
            if info.capability is None:
                if explicit:
                    return True, ("forced by FUSED_QUANT_BACKEND; compute capability unknown (no NVML), "
                                  "trusting the override")
                return False, f"compute capability unknown (install nvidia-ml-py); {self.name} needs {need}"
            if info.capability < self.min_capability:
                return False, f"{self.name} needs {self.hardware}; found {info.arch}"
        if forced:
            return True, f"forced by FUSED_QUANT_BACKEND on {info.vendor} {info.arch or ''}".rstrip()
        with_packages = "".join(f" with {p} {_PACKAGES[p][0](info)}" for p in self.needs)
        return True, f"{info.vendor} {info.arch} ({info.device_name}){with_packages}"


@dataclass(frozen=True)
class SelectedBackend:
    """The backend in use, with the reason it was chosen and what was requested."""

    backend: Backend
    reason: str
    requested: str

    @property
    def name(self) -> str:
        return self.backend.name


_ROWS = (
    Backend(FALLBACK, "pure-torch producers (the reference) and exact torch GEMMs, on every device",
            "fused_quant.backends.fallback", "any device", any_device=True),
    Backend("triton_fp8", "Triton fused producers, torch._scaled_mm FP8 and int8 GEMMs (CUDA SM90+)",
            "fused_quant.backends.triton_fp8", "an NVIDIA GPU (SM90+, Hopper or Blackwell)",
            vendors=("nvidia",), needs=("triton",), min_capability=(9, 0)),
    # forceable on NVIDIA (its Triton kernels and torch._int_mm run on CUDA): how it is tested without AMD
    Backend("hip_w8a8", "Triton int8 silu_mul_quant producers and hipBLASLt W8A8 GEMMs (ROCm / Hygon DCU)",
            "fused_quant.backends.hip_w8a8", "an AMD or Hygon GPU (or a forced CUDA GPU)",
            vendors=("amd", "hygon"), needs=("triton",), forced_on=("nvidia",)),
)
BACKENDS: dict[str, Backend] = {b.name: b for b in _ROWS}


def _valid_names() -> str:
    return f"auto, {', '.join(BACKENDS)}"


def preferred_backend(info: PlatformInfo) -> str:
    """The backend auto mode wants for this platform, before availability."""
    return next((b.name for b in BACKENDS.values() if info.vendor in b.vendors), FALLBACK)


def backend_name_error(env: str | None) -> str | None:
    """What is wrong with a FUSED_QUANT_BACKEND value that names no backend (None: "auto" or a backend's name,
    whether or not that backend can run on this node)."""
    requested = envs.requested_backend(env)
    if requested == "auto" or requested in BACKENDS:
        return None
    return f"FUSED_QUANT_BACKEND={env!r} is not a backend; valid names: {_valid_names()}"


def select_backend(info: PlatformInfo, env: str | None = "auto") -> tuple[str, str]:
    """(backend name, reason) for ``info`` and a FUSED_QUANT_BACKEND value; pure. A backend that runs on every
    device, chosen as the node's own or by name, is given with the node's summary ("no GPU found"), since its own
    reason says nothing of the node (a fallback's reason says why the node's backend cannot run)."""
    if not isinstance(info, PlatformInfo):
        raise TypeError(f"select_backend: info must be a PlatformInfo (fused_quant.platforms.probe() gives this "
                        f"node's), got {type(info).__name__}")
    if env is not None and not isinstance(env, str):
        raise TypeError(f"select_backend: env must be a backend's name, 'auto' or None, got {type(env).__name__} "
                        f"{env!r}; valid names: {_valid_names()}")
    requested = envs.requested_backend(env)
    if requested == "auto":
        want = preferred_backend(info)
        ok, why = BACKENDS[want].is_available(info)
        if ok:
            return want, f"auto: {why}" + (f"; {info.summary()}" if BACKENDS[want].any_device else "")
        return FALLBACK, f"auto: {why}; using {FALLBACK}"
    wrong = backend_name_error(env)
    if wrong:
        raise BackendUnavailableError(wrong)
    ok, why = BACKENDS[requested].is_available(info, explicit=True)
    if not ok:
        others = ", ".join(name for name in ("auto", *BACKENDS) if name != requested)
        raise BackendUnavailableError(f"FUSED_QUANT_BACKEND={requested} cannot run here: {why} "
                                      f"(the other names: {others}; platform: {info.reason})")
    return requested, (f"FUSED_QUANT_BACKEND={requested}: {why}"
                       + (f"; {info.summary()}" if BACKENDS[requested].any_device else ""))


def _select_now() -> SelectedBackend:
    from fused_quant.platforms import current_platform

    info, as_set = current_platform(), envs.backend_as_set()  # read once: the name asked for and the one selected agree
    requested = envs.requested_backend(as_set)
    name, reason = select_backend(info, as_set)
    if requested == "auto" and name == FALLBACK and preferred_backend(info) != FALLBACK:
        logger.warning("fused-quant: %s", reason)
    else:
        logger.info("fused-quant backend %s (%s)", name, reason)
    return SelectedBackend(BACKENDS[name], reason, requested)


def current_backend() -> SelectedBackend:
    """The selected backend for this process (probe + env, decided once per runtime generation)."""
    return runtime.once("backend", _select_now)


@graph_constant
def current_backend_name() -> str:
    """The selected backend's name (under torch.compile a graph constant, not traced selection)."""
    return current_backend().name


def reset_current_backend() -> None:
    """Select again on next use (after changing FUSED_QUANT_BACKEND in-process): ``runtime.reset``."""
    runtime.reset()


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise BackendUnavailableError(f"unknown backend {name!r}; valid names: {', '.join(BACKENDS)}") from None


_loaded: set[str] = set()


def load_backends() -> None:
    """Import every backend's registration modules (idempotent; plain Python: no device, no triton)."""
    for backend in BACKENDS.values():
        if backend.name not in _loaded:
            for module in backend.modules:
                importlib.import_module(f"{backend.package}.{module}")
            _loaded.add(backend.name)
