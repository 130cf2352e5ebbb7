"""``torch`` backend GEMMs: exact int8 (through float64) and FP8 with ``_scaled_mm`` semantics.

Any device. int8 products are at most 2^14 in magnitude, so a float64 matmul is exact
for every K below 2^39 and, unlike CPU ``torch._int_mm`` (~0.8 GOPS), fast.
"""

from __future__ import annotations

import torch

from fused_quant.gemm import GemmProblem, dequant_epilogue, register_gemm_provider

BACKEND = ("torch",)


def _int8_exact(xq, xs, w, ws, bias, out_dtype):
    acc = xq.to(torch.float64) @ w.to(torch.float64).T
    # an int32 sum has no -0.0; a float64 one of negative zeros does (at K = 1 torch's CPU matmul keeps
    # 0 * -w's sign): + 0.0 makes it +0.0, as the spec's int32 accumulator and every other provider give
    return dequant_epilogue(acc.add_(0.0), xs, ws, bias, out_dtype)


def _fp8_emulated(xq, xs, w, ws, bias, out_dtype):
    # fp8 x fp8 products are exact in fp32; accumulate in fp32 as _scaled_mm does, never in the dtype of an
    # enclosing torch.autocast region (which would run this matmul in fp16 or bf16: other bits, and inf)
    device = xq.device.type
    if torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device):
        with torch.autocast(device, enabled=False):
            return _fp8_emulated(xq, xs, w, ws, bias, out_dtype)
    acc = xq.to(torch.float32) @ w.to(torch.float32).T
    return dequant_epilogue(acc, xs, ws, bias, out_dtype)


def _any(problem: GemmProblem) -> tuple[bool, str]:
    return True, ""


register_gemm_provider("torch_int8_f64", _int8_exact, kind="int8", backends=BACKEND, supported=_any, first=False)
register_gemm_provider("torch_fp8_f32", _fp8_emulated, kind="fp8", backends=BACKEND, supported=_any, first=False)
