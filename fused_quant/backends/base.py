"""``Backend``: a name, what it is, and ``is_available(info) -> (ok, reason)``.

A backend's producers and GEMM providers are registered by its folder's
``producers`` / ``gemms`` modules whatever the platform; availability is only
decided when a backend is selected or looked up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from fused_quant.platforms.info import PlatformInfo


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    # (info, explicit) -> (ok, reason); `explicit` is True when the user forced it by env.
    check: Callable[[PlatformInfo, bool], tuple[bool, str]]
    # modules whose import registers this backend's producers and GEMM providers
    modules: tuple[str, ...] = ()

    def is_available(self, info: PlatformInfo, *, explicit: bool = False) -> tuple[bool, str]:
        return self.check(info, explicit)


@dataclass(frozen=True)
class SelectedBackend:
    """The backend in use, with the reason it was chosen and what was requested."""

    backend: Backend
    reason: str
    requested: str

    @property
    def name(self) -> str:
        return self.backend.name
