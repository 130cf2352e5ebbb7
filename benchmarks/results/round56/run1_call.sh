#!/usr/bin/env bash
# fifty-sixth round, run 1: the whole GPU matrix (round 49's run1_call.sh: ci/gpu_suite.sh tests-parallel, every row
# side by side, .whl carried) on this round's package, each row under T seconds (default 540). The commits after
# 15ea429 have not run on a GPU: transformers save staging and meta refusal (937e94c, eec3ea8, 7a1424d), CLI width
# (72fc362), driver-launch grid limits (4b4e7e3), the final-read mends (b538db4).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
SECONDS=0
T=${T:-540} bash benchmarks/results/round49/run1_call.sh
echo "matrix done at ${SECONDS} s"
grep -E "passed|failed|error| rc " $OUT/run1_suite_summary.txt | cut -c1-160
