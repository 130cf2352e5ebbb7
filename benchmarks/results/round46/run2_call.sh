#!/usr/bin/env bash
# forty-sixth round, run 2: the whole GPU matrix on this round's package (round 37's run2_call.sh with T=520, .whl
# carried; its files come back as run1_*)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
T=520 bash benchmarks/results/round37/run2_call.sh
