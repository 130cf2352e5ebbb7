"""``triton_fp8`` producers: the shared Triton act+quant kernels for every activation x key.

Registered whatever the platform (no triton import here); the support predicate
declines inputs the kernels do not take, which then fall back.
"""

from __future__ import annotations

from fused_quant.kernels.launch import triton_supported
from fused_quant.kernels.producers import register_triton_producers

BACKEND = "triton_fp8"

register_triton_producers(BACKEND, lambda key: triton_supported)
