#!/usr/bin/env bash
# forty-ninth round, run 1: the whole GPU matrix on this round's package, whichever card comes (round 37's
# run2_call.sh, each row under T seconds, default 470; .whl carried): the float64 GEMM bound now half an ulp per
# rounding for int8, the int8 epilogue checked bit for bit, the GPU conversion sweep's own clamp, and the value
# checks of the forty-eighth round's package, none of which has run on a GPU
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
T=${T:-470} bash benchmarks/results/round37/run2_call.sh
