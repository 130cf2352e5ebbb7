"""The ``triton_fp8`` backend: Triton producers and FP8 / int8 GEMMs on CUDA SM90+."""

from fused_quant.backends.base import Backend
from fused_quant.platforms.info import PlatformInfo

MIN_CAPABILITY = (9, 0)


def _check(info: PlatformInfo, explicit: bool) -> tuple[bool, str]:
    if info.vendor != "nvidia":
        return False, f"triton_fp8 needs an NVIDIA GPU (SM90+); this node is {info.vendor}"
    if not info.torch_has_cuda:
        return False, f"triton_fp8 needs a CUDA build of torch; torch here is {info.torch_build}"
    if info.triton_version is None:
        return False, "triton_fp8 needs triton; install fused-quant[triton]"
    cap = info.capability
    if cap is None:
        if explicit:
            return True, "forced by FUSED_QUANT_BACKEND; compute capability unknown (no NVML), trusting the override"
        return False, "compute capability unknown (install nvidia-ml-py); triton_fp8 needs SM90+"
    if cap < MIN_CAPABILITY:
        return False, f"triton_fp8 needs SM90+ (Hopper, Blackwell); found {info.arch}"
    return True, f"CUDA {info.arch} ({info.device_name}) with triton {info.triton_version}"


BACKEND = Backend(
    name="triton_fp8",
    description="Triton fused producers, torch._scaled_mm FP8 and int8 GEMMs (CUDA SM90+)",
    check=_check,
    modules=("fused_quant.backends.triton_fp8.producers", "fused_quant.backends.triton_fp8.gemms"),
)
