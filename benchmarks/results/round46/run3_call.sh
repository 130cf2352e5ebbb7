#!/usr/bin/env bash
# forty-sixth round, run 3: one call for whichever card comes. An H200 runs run1_call.sh (the decode benches and
# tests/gpu/test_decode_gpu.py on triton_fp8); any other card runs run2_call.sh (the GPU matrix)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round46/run1_call.sh
else
  bash benchmarks/results/round46/run2_call.sh
fi
