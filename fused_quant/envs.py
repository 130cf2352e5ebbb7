"""The only module that reads ``FUSED_QUANT_*`` environment variables.

Every variable is read when its function is called, never at import, so a
process may set them after ``import fused_quant`` and before first use.
"""

from __future__ import annotations

import os

BACKEND_CHOICES = ("auto", "torch", "triton_fp8", "hip_w8a8")
VLLM_KERNEL_CHOICES = ("first", "last", "off")

# name -> (default, one-line meaning); README's table is checked against this.
VARIABLES: dict[str, tuple[str, str]] = {
    "FUSED_QUANT_BACKEND": (
        "auto",
        "auto | torch | triton_fp8 | hip_w8a8: which backend runs producers and GEMMs",
    ),
    "FUSED_QUANT_NUMERICS": (
        "default",
        "default | hcu: numerics profile used by maybe_fused_act_quant and QuantLinear",
    ),
    "FUSED_QUANT_DISABLED_GEMMS": (
        "",
        "comma-separated GEMM provider names to remove from selection",
    ),
    "FUSED_QUANT_VLLM_KERNEL": (
        "last",
        "first | last | off: where the vLLM plugin puts its int8 linear kernel",
    ),
}


def _get(name: str) -> str:
    return os.environ.get(name, VARIABLES[name][0]).strip()


def backend() -> str:
    """Requested backend name, lower-cased; validated by backend selection."""
    return _get("FUSED_QUANT_BACKEND").lower() or "auto"


def numerics() -> str:
    """Requested numerics profile name; validated by ``numerics.get_profile``."""
    return _get("FUSED_QUANT_NUMERICS").lower() or "default"


def disabled_gemms() -> frozenset[str]:
    raw = _get("FUSED_QUANT_DISABLED_GEMMS")
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


def vllm_kernel() -> str:
    value = _get("FUSED_QUANT_VLLM_KERNEL").lower() or "last"
    if value not in VLLM_KERNEL_CHOICES:
        raise ValueError(
            f"FUSED_QUANT_VLLM_KERNEL={value!r} is not one of {', '.join(VLLM_KERNEL_CHOICES)}"
        )
    return value


def snapshot() -> dict[str, str | None]:
    """The raw values of every FUSED_QUANT_* variable (None when unset)."""
    return {name: os.environ.get(name) for name in VARIABLES}
