"""Peer kernels for the benchmarks: a bare one-pass Triton relu2 -> FP8 static kernel
(plain ``tl.maximum``, approximate division, no NaN care): the launch and bandwidth floor a
fused producer is compared with. Not bit-exact on purpose; never used by the library."""

from __future__ import annotations

import torch


def bare_relu2_fp8_static(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    from fused_quant.kernels.triton.peer_kernels import bare_relu2_fp8_kernel

    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    n = x.numel()
    block = 4096
    bare_relu2_fp8_kernel[(-(-n // block),)](x, out, scale, n, BLOCK=block, num_warps=8)
    return out
