"""Triton JIT kernels shared by the ``triton_fp8`` and ``hip_w8a8`` backends (import needs triton)."""
