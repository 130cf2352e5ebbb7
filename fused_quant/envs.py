"""The only module that reads ``FUSED_QUANT_*`` environment variables.

Every variable is read when its function is called, never at import, so a
process may set them after ``import fused_quant`` and before first use.
"""

from __future__ import annotations

import os

BACKEND_CHOICES = ("auto", "torch", "triton_fp8", "hip_w8a8")
VLLM_KERNEL_CHOICES = ("first", "last", "off")
VLLM_FUSION_CHOICES = ("on", "off")

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
        "first | last | off: where the vLLM plugin puts its int8 linear kernel among vLLM's",
    ),
    "FUSED_QUANT_VLLM_FUSION": (
        "on",
        "on | off: whether the vLLM plugin's int8 kernel accepts pre-quantized (fused) activations",
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


def _choice(name: str, choices: tuple[str, ...]) -> str:
    value = _get(name).lower() or VARIABLES[name][0]
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def vllm_kernel() -> str:
    return _choice("FUSED_QUANT_VLLM_KERNEL", VLLM_KERNEL_CHOICES)


def vllm_fusion() -> bool:
    return _choice("FUSED_QUANT_VLLM_FUSION", VLLM_FUSION_CHOICES) == "on"


def snapshot() -> dict[str, str | None]:
    """The raw values of every FUSED_QUANT_* variable (None when unset)."""
    return {name: os.environ.get(name) for name in VARIABLES}
