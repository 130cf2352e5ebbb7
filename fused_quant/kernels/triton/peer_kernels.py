"""Device code of the benchmark peer: the simplest one-pass relu2 -> FP8 kernel."""

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
