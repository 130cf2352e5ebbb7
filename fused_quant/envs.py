"""The only module that reads ``FUSED_QUANT_*`` environment variables.

Every variable is read when its function is called, never at import, so a
process may set them after ``import fused_quant`` and before first use.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from fused_quant.errors import NumericsProfileError

BACKEND_CHOICES = ("auto", "torch", "triton_fp8", "hip_w8a8")
NUMERICS_CHOICES = ("default", "hcu")  # numerics.PROFILES' names
VLLM_KERNEL_CHOICES = ("first", "last", "off")
VLLM_FUSION_CHOICES = ("on", "off")
PDL_CHOICES = ("on", "off")

# name -> (default, one-line meaning); README's table is checked against this.
VARIABLES: dict[str, tuple[str, str]] = {
    "FUSED_QUANT_BACKEND": (
        "auto",
        "auto | torch | triton_fp8 | hip_w8a8: which backend runs producers and GEMMs",
    ),
    "FUSED_QUANT_NUMERICS": (
        "default",
        "default | hcu: numerics profile of maybe_fused_act_quant (linear_act_quant, the fused MLPs), "
        "FusedSiluAndMulAndQuant and the vLLM producers",
    ),
    "FUSED_QUANT_DISABLED_GEMMS": (
        "",
        "comma-separated GEMM provider names to remove from selection",
    ),
    "FUSED_QUANT_PDL": (
        "on",
        "on | off: programmatic dependent launch of the Triton kernels on NVIDIA SM90+ (off: plain launches)",
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
    return requested_backend(backend_as_set())


def requested_backend(as_set: str | None) -> str:
    """The backend name a FUSED_QUANT_BACKEND value asks for: stripped, lower-cased; unset or spaces: "auto"."""
    return (as_set or "").strip().lower() or "auto"


def backend_as_set() -> str | None:
    """FUSED_QUANT_BACKEND as the environment holds it (None: unset): what selection reads, and a refusal quotes, as
    the other variables' refusals quote theirs (``backend()`` is the name it asks for)."""
    return os.environ.get("FUSED_QUANT_BACKEND")


def numerics() -> str:
    """Requested numerics profile name; raises ``NumericsProfileError`` naming the variable."""
    return _choice("FUSED_QUANT_NUMERICS", NUMERICS_CHOICES, NumericsProfileError)


def disabled_gemms() -> frozenset[str]:
    raw = _get("FUSED_QUANT_DISABLED_GEMMS")
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


def pdl() -> bool:
    return _choice("FUSED_QUANT_PDL", PDL_CHOICES) == "on"


def _choice(name: str, choices: tuple[str, ...], error: type[ValueError] = ValueError) -> str:
    value = _get(name).lower() or VARIABLES[name][0]
    if value not in choices:  # the value as it was set, not as it was compared
        raise error(f"{name}={os.environ.get(name, '')!r} is not one of {', '.join(choices)}")
    return value


def vllm_kernel() -> str:
    return _choice("FUSED_QUANT_VLLM_KERNEL", VLLM_KERNEL_CHOICES)


def vllm_fusion() -> bool:
    return _choice("FUSED_QUANT_VLLM_FUSION", VLLM_FUSION_CHOICES) == "on"


def errors() -> dict[str, str]:
    """Variable name -> what is wrong with its value, for each set variable its reader would refuse.

    ``FUSED_QUANT_BACKEND`` is left to backend selection (a backend may be added at run time).
    """
    found = {}
    for name, read in (("FUSED_QUANT_NUMERICS", numerics), ("FUSED_QUANT_VLLM_KERNEL", vllm_kernel),
                       ("FUSED_QUANT_VLLM_FUSION", vllm_fusion), ("FUSED_QUANT_PDL", pdl)):
        try:
            read()
        except ValueError as exc:
            found[name] = str(exc)
    return found


# how a FUSED_QUANT_DISABLED_GEMMS entry that names no provider is told (the start of the message, by which
# ``gemm.unknown_disabled_gemms_told_elsewhere`` filters the library's warning where a caller says it itself)
UNKNOWN_DISABLED_GEMMS = "FUSED_QUANT_DISABLED_GEMMS names no GEMM provider"


def unknown_disabled_gemms(known: Collection[str]) -> str:
    """'' or a message naming the FUSED_QUANT_DISABLED_GEMMS entries that are not in ``known``."""
    unknown = sorted(disabled_gemms().difference(known))
    if not unknown:
        return ""
    return (f"{UNKNOWN_DISABLED_GEMMS} called {', '.join(map(repr, unknown))}; "
            f"known providers: {', '.join(sorted(known))}")


def snapshot() -> dict[str, str | None]:
    """The raw values of every FUSED_QUANT_* variable (None when unset)."""
    return {name: os.environ.get(name) for name in VARIABLES}
