#!/usr/bin/env bash
# fifty-fourth round, run 1: the fifty-third round's run 5 (the selftest's 128 checks on each backend as the matrix
# runs it, the quantizing-calls bench test), none of which has run on a GPU, then run 3's script in the time left
# (on an H100 the FP8 gate_up row at 192 tokens retimed five times with its install rule and bench gemm; on an H200
# the decode benches and decode GPU tests)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
git log -1 --format=%H 2>/dev/null
bash benchmarks/results/round53/run5_call.sh
echo "selftests done at ${SECONDS} s"
timeout $((590 - SECONDS)) bash benchmarks/results/round53/run3_call.sh
echo "run 3's script rc $? at ${SECONDS} s"
