#!/usr/bin/env bash
# fifty-fifth round, run 2: the whole GPU matrix (round 49's run1_call.sh: ci/gpu_suite.sh tests-parallel, every row
# side by side, .whl carried) on this round's package, each row under T seconds (default 540: the fifty-third round's
# triton_fp8 row was cut at 470 s in its last file). The commits after b98ba81 have not run on a GPU: the probe's
# amdsmi / KFD merge and vendor GEMM errors (bde9919), the bound call's table mark (428c425), the table row of 650d845.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
T=${T:-540} bash benchmarks/results/round49/run1_call.sh
echo "matrix done at ${SECONDS} s"
grep -E "passed|failed|error| rc " $OUT/run1_suite_summary.txt | cut -c1-160
