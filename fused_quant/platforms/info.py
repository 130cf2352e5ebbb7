"""``PlatformInfo``: what the probe saw, plus the per-arch facts selection needs (data)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

VENDORS = ("nvidia", "amd", "hygon", "cpu", "other")

# Hygon DCU archs (gcnArchName). gfx906 is also AMD's MI50/MI60, so on its own it
# does not mean Hygon: a DTK build marker or a Hygon device name / vendor id must agree.
HYGON_ARCHS = frozenset({"gfx906", "gfx926", "gfx928", "gfx936", "gfx938"})
HYGON_ONLY_ARCHS = HYGON_ARCHS - {"gfx906"}
HYGON_PCI_VENDOR_ID = 0x1D94
AMD_PCI_VENDOR_ID = 0x1002
NVIDIA_PCI_VENDOR_ID = 0x10DE

# Concrete FP8 dtype per AMD / Hygon arch: e4m3fnuz on MI300 (gfx94x), OCP
# e4m3fn on gfx950 and RDNA4 (gfx12xx). Archs not listed have no FP8 producer.
AMD_FP8_DTYPES: dict[str, torch.dtype] = {
    "gfx940": torch.float8_e4m3fnuz,
    "gfx941": torch.float8_e4m3fnuz,
    "gfx942": torch.float8_e4m3fnuz,
    "gfx950": torch.float8_e4m3fn,
    "gfx1200": torch.float8_e4m3fn,
    "gfx1201": torch.float8_e4m3fn,
}
# Hygon archs treated as having OCP FP8. Not verified on hardware here: the
# BW-class parts (gfx936 / gfx938) are listed; correct this table, not code.
HYGON_FP8_DTYPES: dict[str, torch.dtype] = {
    "gfx936": torch.float8_e4m3fn,
    "gfx938": torch.float8_e4m3fn,
}
# NVIDIA: FP8 tensor cores from SM 8.9 (Ada) on.
NVIDIA_FP8_MIN_CAPABILITY = (8, 9)

_SM_RE = re.compile(r"^sm_(\d+)(\d)a?$")


@dataclass(frozen=True)
class PlatformInfo:
    """One node as the probe saw it; selection is a pure function of this and the env."""

    vendor: str
    arch: str | None = None
    device_name: str | None = None
    device_count: int = 0
    fp8_dtype: torch.dtype | None = None
    has_fp8: bool = False
    torch_build: str = "cpu"  # "cuda <ver>", "hip <ver>" or "cpu"
    reason: str = ""
    triton_version: str | None = None
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def capability(self) -> tuple[int, int] | None:
        return sm_capability(self.arch)

    @property
    def torch_has_cuda(self) -> bool:
        return self.torch_build.startswith("cuda")

    @property
    def torch_has_hip(self) -> bool:
        return self.torch_build.startswith("hip")

    def summary(self) -> str:
        """What was found, for people: ``"no GPU found"``, ``"8 x NVIDIA H200 (nvidia sm_90)"``."""
        if self.vendor == "cpu":
            return "no GPU found"
        arch = f"{self.vendor} {self.arch}" if self.arch else f"{self.vendor}, arch unknown"
        return f"{self.device_count} x {self.device_name or 'unnamed GPU'} ({arch})"

    def as_dict(self) -> dict[str, object]:
        return {
            "vendor": self.vendor,
            "arch": self.arch,
            "device_name": self.device_name,
            "device_count": self.device_count,
            "fp8_dtype": str(self.fp8_dtype).removeprefix("torch.") if self.fp8_dtype else None,
            "has_fp8": self.has_fp8,
            "torch_build": self.torch_build,
            "triton_version": self.triton_version,
            "reason": self.reason,
            "summary": self.summary(),
        }


def sm_capability(arch: str | None) -> tuple[int, int] | None:
    """``"sm_90"`` -> (9, 0); ``"sm_100"`` -> (10, 0); None for anything else."""
    m = _SM_RE.match(arch or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def sm_at_least(arch: str | None, minimum: tuple[int, int]) -> bool:
    """Whether ``arch`` is an NVIDIA ``sm_XY`` of compute capability ``minimum`` or later; False for any other."""
    cap = sm_capability(arch)
    return cap is not None and cap >= minimum


def sm_arch(major: int, minor: int) -> str:
    return f"sm_{major}{minor}"


def fp8_dtype_for(vendor: str, arch: str | None) -> torch.dtype | None:
    """The FP8 dtype a node computes with, or None when its arch has no FP8."""
    if vendor == "nvidia":
        return torch.float8_e4m3fn if sm_at_least(arch, NVIDIA_FP8_MIN_CAPABILITY) else None
    if vendor == "amd":
        return AMD_FP8_DTYPES.get(base_gfx(arch))
    if vendor == "hygon":
        return HYGON_FP8_DTYPES.get(base_gfx(arch))
    if vendor == "cpu":
        return torch.float8_e4m3fn  # the pure-torch backend emulates OCP e4m3fn
    return None


_GFX_NAME = re.compile(r"gfx[0-9a-f]{3,4}")


def base_gfx(arch: object) -> str | None:
    """An arch name -> ``"gfx942"``: features (``:sramecc+:xnack-``) and case dropped; None where it names no gfx
    target (an amdsmi's "N/A", or ROCm 6.3's all-ones "not supported" value, printed ``gfxffffffffffffffff``)."""
    base = ("" if arch is None else str(arch)).strip().lower().split(":")[0]
    return base if _GFX_NAME.fullmatch(base) else None
