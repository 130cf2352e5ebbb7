"""Platform facts: ``probe()`` / ``current_platform()`` -> ``PlatformInfo`` (no CUDA context, no vendor imports here)."""

from fused_quant.platforms.info import (
    AMD_FP8_DTYPES,
    AMD_PCI_VENDOR_ID,
    HYGON_ARCHS,
    HYGON_FP8_DTYPES,
    HYGON_ONLY_ARCHS,
    HYGON_PCI_VENDOR_ID,
    NVIDIA_FP8_MIN_CAPABILITY,
    NVIDIA_PCI_VENDOR_ID,
    VENDORS,
    PlatformInfo,
    fp8_dtype_for,
    sm_arch,
    sm_at_least,
    sm_capability,
)
from fused_quant.platforms.probe import current_platform, decode_gfx_target_version, probe

__all__ = [
    "AMD_FP8_DTYPES",
    "AMD_PCI_VENDOR_ID",
    "HYGON_ARCHS",
    "HYGON_FP8_DTYPES",
    "HYGON_ONLY_ARCHS",
    "HYGON_PCI_VENDOR_ID",
    "NVIDIA_FP8_MIN_CAPABILITY",
    "NVIDIA_PCI_VENDOR_ID",
    "VENDORS",
    "PlatformInfo",
    "current_platform",
    "decode_gfx_target_version",
    "fp8_dtype_for",
    "probe",
    "sm_arch",
    "sm_at_least",
    "sm_capability",
]
