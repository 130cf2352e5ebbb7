"""Peer kernel for the benchmarks: a bare one-pass Triton relu2 -> FP8 static kernel (plain
``tl.maximum``, approximate division, no NaN care), the launch and bandwidth floor a fused
producer is compared with. Not bit-exact on purpose; the library never uses it. Needs triton."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def bare_relu2_fp8_kernel(x_ptr, out_ptr, scale_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.maximum(x, 0.0)
    y = (r * r).to(tl.bfloat16).to(tl.float32) / tl.load(scale_ptr)
    tl.store(out_ptr + offs, tl.clamp(y, -448.0, 448.0).to(tl.float8e4nv), mask=mask)


def bare_relu2_fp8_static(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """relu2(x) / scale as FP8 e4m3fn, one flat launch over every element of ``x``."""
    out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    n = x.numel()
    block = 4096
    bare_relu2_fp8_kernel[(-(-n // block),)](x, out, scale, n, BLOCK=block, num_warps=8)
    return out
