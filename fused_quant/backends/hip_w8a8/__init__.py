"""The ``hip_w8a8`` backend: ROCm / Hygon DCU W8A8 int8 (hipBLASLt) with the fused silu_mul_quant.

Chosen automatically on AMD and Hygon devices; forceable wherever Triton and an
int8 GEMM run (a CUDA GPU included), which is how it is tested without AMD hardware.
"""

from fused_quant.backends.base import Backend
from fused_quant.platforms.info import PlatformInfo


def _check(info: PlatformInfo, explicit: bool) -> tuple[bool, str]:
    if info.triton_version is None:
        return False, "hip_w8a8 needs triton; install fused-quant[triton]"
    if info.vendor in ("amd", "hygon"):
        if not info.torch_has_hip:
            return False, f"hip_w8a8 needs a ROCm/DTK build of torch; torch here is {info.torch_build}"
        return True, f"{info.vendor} {info.arch} ({info.device_name}) with triton {info.triton_version}"
    if explicit and info.vendor == "nvidia" and info.torch_has_cuda:
        return True, "forced by FUSED_QUANT_BACKEND on an NVIDIA GPU (Triton kernels and torch._int_mm run on CUDA)"
    return False, f"hip_w8a8 needs an AMD or Hygon GPU (or a forced CUDA GPU); this node is {info.vendor}"


BACKEND = Backend(
    name="hip_w8a8",
    description="Triton int8 silu_mul_quant producers and hipBLASLt W8A8 GEMMs (ROCm / Hygon DCU)",
    check=_check,
    modules=("fused_quant.backends.hip_w8a8.producers", "fused_quant.backends.hip_w8a8.gemms"),
)
