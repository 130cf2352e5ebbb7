#!/usr/bin/env bash
# fiftieth round, run 1 (whichever card comes, named in device.txt): round 46's run1_call.sh, i.e. bench mlp,
# bench host, bench gemm, the decode targets over them (the report's "never slower" against every other
# provider), then tests/gpu/test_decode_gpu.py on triton_fp8 in the time left
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
bash benchmarks/results/round46/run1_call.sh
