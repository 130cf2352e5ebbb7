#!/usr/bin/env bash
# forty-ninth round, run 2 (an H200; not run): round 46's run1_call.sh, i.e. bench mlp,
# bench host, bench gemm, the decode targets over them (the report's new "never slower" peers), then
# tests/gpu/test_decode_gpu.py on triton_fp8 in the time left
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
bash benchmarks/results/round46/run1_call.sh
