"""``hip_w8a8`` producers: the shared Triton kernels; int8 keys everywhere (the HCU
``silu_mul_quant``), FP8 keys only where the arch has FP8 (e4m3fnuz on gfx94x)."""

from __future__ import annotations

import torch

from fused_quant import keys as K
from fused_quant.kernels.launch import triton_supported
from fused_quant.kernels.producers import register_triton_producers
from fused_quant.registry import platform_has_fp8, platform_label

BACKEND = "hip_w8a8"


def _fp8_supported(x: torch.Tensor, scale: torch.Tensor | None) -> tuple[bool, str]:
    if not platform_has_fp8():
        return False, f"{platform_label()} has no FP8; use an int8 key"
    return triton_supported(x, scale)


register_triton_producers(BACKEND, lambda key: _fp8_supported if K.is_fp8(key) else triton_supported)
