"""``triton_fp8`` GEMM providers, in selection order: FP8 ``torch._scaled_mm``; int8 Triton
scaled GEMM (dequant fused), then ``torch._int_mm`` + epilogue."""

from fused_quant.gemm import register_gemm_provider
from fused_quant.kernels import gemm_launch as g

BACKENDS = ("triton_fp8",)

register_gemm_provider("scaled_mm_fp8", g.scaled_mm_fp8, kind="fp8", backends=BACKENDS,
                       supported=g.scaled_mm_supported, first=False)
register_gemm_provider("triton_int8", g.triton_int8, kind="int8", backends=BACKENDS,
                       supported=g.triton_int8_supported, first=False)
register_gemm_provider("int_mm_int8", g.int_mm_int8, kind="int8", backends=BACKENDS,
                       supported=g.int_mm_supported, first=False)
