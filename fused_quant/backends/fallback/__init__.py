"""The ``torch`` backend: the spec in pure torch, on any device; the fallback of every other backend."""

from fused_quant.backends.base import Backend
from fused_quant.platforms.info import PlatformInfo


def _check(info: PlatformInfo, explicit: bool) -> tuple[bool, str]:
    return True, "pure torch runs on every device"


BACKEND = Backend(
    name="torch",
    description="pure-torch producers (the reference) and exact torch GEMMs",
    check=_check,
    modules=("fused_quant.backends.fallback.producers", "fused_quant.backends.fallback.gemms"),
)
