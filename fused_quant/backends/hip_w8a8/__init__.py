"""The ``hip_w8a8`` backend: ROCm / Hygon DCU W8A8 int8 (hipBLASLt) with the fused silu_mul_quant.

Chosen automatically on AMD and Hygon devices; forceable wherever Triton and an
int8 GEMM run (a CUDA GPU included), which is how it is tested without AMD hardware.
"""
