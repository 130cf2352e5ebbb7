#!/usr/bin/env bash
# fortieth round, run 1 (one call): the decode benches and the targets table (round 37's run1_call.sh: bench host
# three times, bench gemm, bench mlp, python -m benchmarks.report), then the whole GPU matrix (round 37's
# run2_call.sh, .whl carried, each row's limit 330 s), on the package named in commits.txt
SECONDS=0
bash benchmarks/results/round37/run1_call.sh
echo "benches done at ${SECONDS} s"
T=330 bash benchmarks/results/round37/run2_call.sh
echo "matrix done at ${SECONDS} s"
