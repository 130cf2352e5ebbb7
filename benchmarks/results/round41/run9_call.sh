#!/usr/bin/env bash
# forty-first round, run 9: what run 6 meant to run and its -k left out: the chain's picks against the rows this GPU
# takes (on an H100: its own rows) and the triton_fp8 row's tests that run 5's 330 s limit cut off
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M="triton_fp8 or (gpu and not hip_w8a8)"
FUSED_QUANT_BACKEND=triton_fp8 timeout 120 python3 -m pytest -q -p no:cacheprovider -m "$M" tests/kernels/test_small_m_gemm.py \
  -k chain_picks 2>&1 | tail -n 2
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -p no:cacheprovider -m "$M" tests/test_pure_torch.py \
  tests/test_bench_cli.py 2>&1 | tail -n 2
