"""``triton_fp8`` GEMM providers, in selection order: FP8 the small-M Triton GEMM (where the sweep
measured it faster), then ``torch._scaled_mm``; int8 the small-M Triton GEMM, the Triton scaled
GEMM (dequant fused), then ``torch._int_mm`` + epilogue."""

from fused_quant.gemm import register_gemm_provider
from fused_quant.kernels import gemm_launch as g

BACKENDS = ("triton_fp8",)

register_gemm_provider("small_m_fp8", g.small_m_gemm, kind="fp8", backends=BACKENDS,
                       supported=g.small_m_supported_in("triton_fp8"), first=False, bind=g.bind_small_m,
                       bind_quantizing=g.bind_small_m_from_producer,
                       bind_producing=g.bind_small_m_producing)
register_gemm_provider("scaled_mm_fp8", g.scaled_mm_fp8, kind="fp8", backends=BACKENDS,
                       supported=g.scaled_mm_supported, first=False, bind=g.bind_scaled_mm)
register_gemm_provider("small_m_int8", g.small_m_gemm, kind="int8", backends=BACKENDS,
                       supported=g.small_m_supported_in("triton_fp8"), first=False, bind=g.bind_small_m,
                       bind_quantizing=g.bind_small_m_from_producer,
                       bind_producing=g.bind_small_m_producing)
register_gemm_provider("triton_int8", g.triton_int8, kind="int8", backends=BACKENDS,
                       supported=g.triton_int8_supported, first=False, bind=g.bind_triton_int8)
register_gemm_provider("int_mm_int8", g.int_mm_int8, kind="int8", backends=BACKENDS,
                       supported=g.int_mm_supported, first=False, bind=g.bind_int_mm)
