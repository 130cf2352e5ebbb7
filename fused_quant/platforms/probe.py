"""``probe()``: what GPU this node has, learned without creating a CUDA/HIP context.

Sources: torch build info, NVML (nvidia-ml-py), /proc/driver/nvidia, amdsmi, KFD
sysfs; never torch.cuda, never a subprocess. Each source is a pure function of
its inputs; ``probe()`` wires the real ones and caches the result.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from fused_quant import runtime
from fused_quant.platforms.info import (
    HYGON_ONLY_ARCHS,
    HYGON_PCI_VENDOR_ID,
    PlatformInfo,
    base_gfx,
    fp8_dtype_for,
    sm_arch,
)

logger = logging.getLogger("fused_quant")

NVIDIA_PROC_ROOT = Path("/proc/driver/nvidia")
KFD_SYSFS_ROOT = Path("/sys/class/kfd/kfd/topology")
TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton-rocm", "pytorch-triton")
# A visibility variable set to "" or "-1" hides every device. Any other value
# (a list of ids) is not interpreted: device_count stays the physical count.
NVIDIA_VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES",)
AMD_VISIBILITY_VARS = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")  # HIP honours both


@dataclass(frozen=True)
class Sighting:
    """What one source saw: a GPU (``vendor`` set) or nothing, with a note saying why."""

    vendor: str | None
    note: str
    arch: str | None = None
    device_name: str | None = None
    device_count: int = 0
    error: bool = False  # the source was there but failed; the note must reach the reason

    @property
    def found(self) -> bool:
        return self.vendor is not None


def torch_build_of(version: Any) -> str:
    """``"cuda 12.8"``, ``"hip 6.3.4"`` or ``"cpu"`` from a ``torch.version``-like object."""
    if getattr(version, "hip", None):
        return f"hip {version.hip}"
    if getattr(version, "cuda", None):
        return f"cuda {version.cuda}"
    return "cpu"


def dtk_marker(version: Any) -> str | None:
    """The DTK (Hygon's ROCm fork) marker in a torch build, or None for a stock build."""
    dtk = getattr(version, "dtk", None)
    if dtk:
        return f"torch.version.dtk={dtk}"
    for attr in ("__version__", "hip"):
        text = str(getattr(version, attr, None) or "")
        if "dtk" in text.lower():
            return f"torch.version.{attr}={text}"
    return None


def hidden_by(env: Mapping[str, str], names: Iterable[str]) -> str | None:
    """The visibility variable that hides every device (set to "" or "-1"), or None."""
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() in ("", "-1"):
            return f"{name}={value!r}"
    return None


def decode_gfx_target_version(value: int) -> str | None:
    """KFD's ``gfx_target_version`` (major*10000 + minor*100 + stepping) -> ``"gfx942"``.

    The stepping is printed in hex (90010 -> gfx90a) as LLVM names it; 0 (a CPU node) -> None.
    """
    if value < 10000:  # no major version: a CPU node's 0, or no version in this form
        return None
    major, rest = divmod(value, 10000)
    minor, stepping = divmod(rest, 100)
    return f"gfx{major}{minor}{stepping:x}"


def gfx_name(raw: object) -> str | None:
    """An arch as a source reports it -> ``"gfx942"``: KFD's integer form decoded, a name read by ``base_gfx``;
    None where it names no gfx target (an amdsmi without the field among them)."""
    text = "" if raw is None else str(raw).strip()
    return decode_gfx_target_version(int(text)) if text.isdigit() else base_gfx(text)


def classify_amd_like(vendor_id: int | None, names: Iterable[str | None], arch: str | None,
                      dtk: str | None) -> tuple[str, str]:
    """("hygon" | "amd", evidence) for a ROCm-visible GPU; gfx906 alone is AMD's MI50/MI60."""
    if vendor_id == HYGON_PCI_VENDOR_ID:
        return "hygon", f"PCI vendor 0x{vendor_id:04x}"
    for name in names:
        if name and ("dcu" in name.lower() or "hygon" in name.lower()):
            return "hygon", f"device name {name!r}"
    base = base_gfx(arch)
    if base in HYGON_ONLY_ARCHS:
        return "hygon", f"{base} is a Hygon-only arch"
    if base == "gfx906" and dtk:
        return "hygon", f"gfx906 with DTK build ({dtk})"
    return "amd", f"PCI vendor 0x{vendor_id:04x}" if vendor_id is not None else "no Hygon evidence"


def _shut_down(call: Callable[[], object], what: str) -> None:
    """A management library's shutdown after its query: a failure changes nothing the probe reports, so it is told
    at debug level, not raised."""
    try:
        call()
    except Exception as exc:
        logger.debug("platform probe: %s failed (%s: %s)", what, type(exc).__name__, exc)


def probe_nvml(nvml: Any) -> Sighting:
    """Device 0 through a ``pynvml``-like module; NVML needs no CUDA context."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # driver missing or too old: fall through to other sources
        return Sighting(None, f"NVML init failed ({type(exc).__name__}: {exc})", error=True)
    try:
        count = int(nvml.nvmlDeviceGetCount())
        if count == 0:
            return Sighting(None, "NVML: 0 devices")
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        name = nvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)  # bytes before nvidia-ml-py 11.5
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    except Exception as exc:
        return Sighting(None, f"NVML query failed ({type(exc).__name__}: {exc})", error=True)
    finally:
        _shut_down(nvml.nvmlShutdown, "nvml.nvmlShutdown()")
    return Sighting("nvidia", f"NVML: {count} x {name}, compute capability {major}.{minor}",
                    arch=sm_arch(int(major), int(minor)), device_name=name, device_count=count)


def probe_nvidia_procfs(root: Path) -> Sighting:
    """NVIDIA GPUs from ``<root>/gpus/*/information``; gives names but no compute capability."""
    files = sorted((root / "gpus").glob("*/information"))
    if not files:
        return Sighting(None, f"no NVIDIA GPUs under {root}")
    name = None
    for line in files[0].read_text(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Model":
            name = value.strip()
            break
    return Sighting("nvidia", f"{root}: {len(files)} x {name}; compute capability needs NVML "
                    "(install nvidia-ml-py)", device_name=name, device_count=len(files))


def _as_int(value: Any) -> int | None:
    # amdsmi reports ids as ints or as "0x1002" strings depending on its version
    try:
        return value if isinstance(value, int) else int(str(value), 0)
    except ValueError:
        return None


def probe_amdsmi(amdsmi: Any, dtk: str | None) -> Sighting:
    """Processor 0 through an ``amdsmi``-like module; any failure lets sysfs try next."""
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:
        return Sighting(None, f"amdsmi init failed ({type(exc).__name__}: {exc})", error=True)
    try:
        handles = list(amdsmi.amdsmi_get_processor_handles())
        if not handles:
            return Sighting(None, "amdsmi: 0 GPUs")
        asic = amdsmi.amdsmi_get_gpu_asic_info(handles[0])
        raw_arch, name, vendor_id = (asic.get(field) for field in ("target_graphics_version", "market_name",
                                                                    "vendor_id"))
    except Exception as exc:  # an answer that is no dict among them
        return Sighting(None, f"amdsmi query failed ({type(exc).__name__}: {exc})", error=True)
    finally:
        _shut_down(amdsmi.amdsmi_shut_down, "amdsmi.amdsmi_shut_down()")
    arch = gfx_name(raw_arch)
    name = None if str(name or "").strip().upper() in ("", "N/A") else str(name)
    vendor, evidence = classify_amd_like(_as_int(vendor_id), [name], arch, dtk)
    shown = arch or f"no usable arch: {raw_arch!r}"
    return Sighting(vendor, f"amdsmi: {len(handles)} x {name} ({shown}), {vendor} by {evidence}",
                    arch=arch, device_name=name, device_count=len(handles))


def read_kfd_properties(path: Path) -> dict[str, int]:
    """A KFD ``properties`` file (``key value`` lines) as ints; non-integer values are skipped."""
    props: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        key, _, value = line.strip().partition(" ")
        try:
            props[key] = int(value.strip())
        except ValueError:
            continue
    return props


def probe_kfd_sysfs(root: Path, dtk: str | None) -> Sighting:
    """AMD / Hygon GPUs from ``<root>/nodes/*/properties`` (the ROCm KFD topology)."""
    nodes = sorted((p for p in (root / "nodes").glob("*") if p.name.isdigit()), key=lambda p: int(p.name))
    gpus = []
    for node in nodes:
        try:
            props = read_kfd_properties(node / "properties")
        except OSError:
            continue  # a node vanishing or unreadable says nothing about the others
        arch = decode_gfx_target_version(props.get("gfx_target_version", 0))
        if arch is not None:
            gpus.append((node, props, arch))
    if not gpus:
        where = "CPU nodes only" if nodes else "no nodes"
        return Sighting(None, f"KFD sysfs {root}: {where}")
    node, props, arch = gpus[0]
    name_file = node / "name"
    name = (name_file.read_text(errors="replace").strip() if name_file.is_file() else "") or None
    vendor_id = props.get("vendor_id")
    vendor, evidence = classify_amd_like(vendor_id, [name], arch, dtk)
    return Sighting(vendor, f"KFD sysfs: {len(gpus)} x {name or arch} ({arch}), {vendor} by {evidence}",
                    arch=arch, device_name=name, device_count=len(gpus))


def installed_triton_version(lookup: Callable[[str], str] = importlib.metadata.version,
                             find_spec: Callable[[str], object] = importlib.util.find_spec) -> str | None:
    """Triton's distribution version, read from metadata (importing triton is slow and may touch the
    driver); None when no distribution is installed or the ``triton`` module cannot be found (also a
    process that blocked it with ``sys.modules["triton"] = None``)."""
    try:
        if find_spec("triton") is None:
            return None
    except (ImportError, ValueError):  # a broken half-imported module
        return None
    for dist in TRITON_DISTRIBUTIONS:
        try:
            return lookup(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def import_optional(name: str) -> ModuleType | Sighting:
    """The module, or a miss saying why it is unusable (some vendor modules raise OSError at import)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return Sighting(None, f"{name} not installed")
    except Exception as exc:
        return Sighting(None, f"{name} import failed ({type(exc).__name__}: {exc})", error=True)


def _with_kfd_arch(smi: Sighting, kfd: Sighting, dtk: str | None) -> Sighting:
    """amdsmi's sighting (names, count) with the KFD tree's arch; Hygon where either source's evidence says so (a
    name, a PCI vendor, or the arch amdsmi could not give: a Hygon-only one, gfx906 with DTK's torch)."""
    if not kfd.found or kfd.arch is None:
        return smi
    vendor, _ = classify_amd_like(None, [smi.device_name, kfd.device_name], kfd.arch, dtk)
    if "hygon" in (smi.vendor, kfd.vendor):
        vendor = "hygon"
    return replace(smi, vendor=vendor, arch=kfd.arch,
                   note=f"{smi.note}; its arch from the KFD tree: {kfd.note}")


def probe_with(version: Any, env: Mapping[str, str], load: Callable[[str], ModuleType | Sighting],
               proc_root: Path, sysfs_root: Path, triton_version: str | None) -> PlatformInfo:
    """The whole probe over injected inputs; ``probe()`` passes the real ones."""
    build = torch_build_of(version)
    dtk = dtk_marker(version)

    def nvidia() -> Iterable[Sighting]:
        if hidden := hidden_by(env, NVIDIA_VISIBILITY_VARS):
            yield Sighting(None, f"NVIDIA GPUs hidden by {hidden}")
            return
        nvml = load("pynvml")
        yield nvml if isinstance(nvml, Sighting) else probe_nvml(nvml)
        yield probe_nvidia_procfs(proc_root)

    def amd() -> Iterable[Sighting]:
        if hidden := hidden_by(env, AMD_VISIBILITY_VARS):
            yield Sighting(None, f"ROCm GPUs hidden by {hidden}")
            return
        smi = load("amdsmi")
        smi = smi if isinstance(smi, Sighting) else probe_amdsmi(smi, dtk)
        if smi.found and smi.arch is None:  # an amdsmi that names no arch (ROCm 6.0-6.2 have no field): KFD's does
            yield _with_kfd_arch(smi, probe_kfd_sysfs(sysfs_root, dtk), dtk)
            return
        yield smi
        yield probe_kfd_sysfs(sysfs_root, dtk)

    # Ask the vendor torch was built for first, so a mixed node reports the usable GPU.
    sources = (amd, nvidia) if build.startswith("hip") else (nvidia, amd)
    misses: list[Sighting] = []
    seen: Sighting | None = None
    for source in sources:
        for sighting in source():
            if sighting.found:
                seen = sighting
                break
            misses.append(sighting)
        if seen is not None:
            break

    if seen is None:
        vendor, arch, name, count = "cpu", None, None, 0
        notes = [m.note for m in misses] + ["no GPU found"]
    else:
        vendor, arch, name, count = seen.vendor, seen.arch, seen.device_name, seen.device_count
        notes = [m.note for m in misses if m.error] + [seen.note]
    notes.append(f"torch {build}" + (f" ({dtk})" if dtk else ""))
    fp8 = fp8_dtype_for(vendor, arch)
    extra = {"dtk": dtk} if dtk else {}
    return PlatformInfo(vendor=vendor, arch=arch, device_name=name, device_count=count,
                        fp8_dtype=fp8, has_fp8=fp8 is not None, torch_build=build,
                        reason="; ".join(notes), triton_version=triton_version, extra=extra)


def _probe_now() -> PlatformInfo:
    import torch  # already imported by info; torch.version is plain build metadata

    return probe_with(torch.version, os.environ, import_optional, NVIDIA_PROC_ROOT,
                      KFD_SYSFS_ROOT, installed_triton_version())


def probe(refresh: bool = False) -> PlatformInfo:
    """This node's ``PlatformInfo``, kept in the runtime state; ``refresh=True`` resets the whole
    runtime state (backend choice and every cache included) and probes again."""
    if refresh:
        runtime.reset()
    return runtime.once("platform", _probe_now)


def current_platform() -> PlatformInfo:
    """The cached probe result (what backend selection reads)."""
    return probe()
