"""Named numerics profiles (docs/NUMERICS.md): ``default`` and ``hcu``.

A profile is a frozen record of the few choices on which existing systems
disagree; every backend's producers take one and stay bitwise equal to
``reference.py`` for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fused_quant.errors import NumericsProfileError


@dataclass(frozen=True)
class NumericsProfile:
    """One numerics profile of docs/NUMERICS.md: its ``name`` (what ``numerics=`` and FUSED_QUANT_NUMERICS take),
    whether silu_and_mul rounds its product to the activation dtype before quantizing, and a ``description``."""

    name: str
    # silu_and_mul: round y = silu(g) * u to the activation dtype before the
    # quantizer (the unfused eager chain) or keep it fp32 (Hygon's fused kernel).
    round_silu_product: bool
    description: str


DEFAULT = NumericsProfile("default", True, "the unfused eager chain: activation rounded to T, then the quantizer")
HCU = NumericsProfile("hcu", False, "Hygon DCU fused kernel: T(silu(g)) * u kept in fp32 into the quantizer")

PROFILES: dict[str, NumericsProfile] = {p.name: p for p in (DEFAULT, HCU)}


def get_profile(profile: str | NumericsProfile | None) -> NumericsProfile:
    """Resolve a profile name (None means ``default``); unknown names raise."""
    if profile is None:
        return DEFAULT
    if isinstance(profile, NumericsProfile):
        return profile
    if isinstance(profile, str) and profile in PROFILES:
        return PROFILES[profile]
    raise NumericsProfileError(
        f"unknown numerics profile {profile!r}; expected one of {', '.join(PROFILES)}"
    )
