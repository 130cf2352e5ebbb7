#!/usr/bin/env bash
# forty-eighth round, run 1: one call for whichever card comes. An H200 runs round 46's run1_call.sh (bench mlp,
# bench host, bench gemm, the targets report, then tests/gpu/test_decode_gpu.py on triton_fp8); any other card runs
# round 46's run2_call.sh (the whole GPU matrix, .whl carried) on this package, whose transformers and CLI code
# changed since the last GPU matrix
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round46/run1_call.sh
else
  bash benchmarks/results/round46/run2_call.sh
fi
