#!/usr/bin/env bash
# fifty-third round, run 2, the same machine: the one triton_fp8 matrix test run 1's 470 s row limit cut
# (tests/test_quantizing_calls_bench.py; every test before it passed), then round 50's decode benches and decode tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
SECONDS=0
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" \
  tests/test_quantizing_calls_bench.py 2>&1 | tail -3
echo "quantizing-calls test done at ${SECONDS} s"
bash benchmarks/results/round50/run1_call.sh
echo "decode done at ${SECONDS} s"
