"""ROCm FP8 loading: OCP e4m3fn weights to e4m3fnuz for gfx94x.

The same bit pattern means half the value in e4m3fnuz (exponent bias 8 instead of 7), so
the bits are kept and every scale doubles; 0x80 (-0 in e4m3fn) is NaN in e4m3fnuz and
becomes 0. A NaN weight (0x7f / 0xff in e4m3fn) would turn into +-240 and is refused.
"""

from __future__ import annotations

import torch

from fused_quant.validation import QuantDTypeError, check_weight_values


def e4m3fn_to_e4m3fnuz(weight: torch.Tensor, weight_scale: torch.Tensor,
                       input_scale: torch.Tensor | None = None, *, where: str = "weight"
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(weight as e4m3fnuz, weight_scale * 2, input_scale * 2); values checked once, at load (``where`` names the
    weight in the messages). Every conversion to e4m3fnuz (checkpoint loading included) is this one."""
    if weight.dtype != torch.float8_e4m3fn:
        raise QuantDTypeError(f"{where}: expected float8_e4m3fn weights, got {weight.dtype}")
    check_weight_values(weight, what=where)  # a NaN code has no e4m3fnuz twin, and no place in a layer
    bits = weight.view(torch.uint8)
    bits = torch.where(bits == 0x80, torch.zeros_like(bits), bits)
    return (bits.view(torch.float8_e4m3fnuz), weight_scale * 2.0,
            None if input_scale is None else input_scale * 2.0)
