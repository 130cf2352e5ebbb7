#!/usr/bin/env bash
# thirty-eighth round, run 1 (one call): round 37's two scripts again on the package named in commits.txt (run 1: the decode
# benches and the targets table; run 2: the whole GPU matrix, .whl carried, each row's limit 400 s)
bash benchmarks/results/round37/run1_call.sh
T=400 bash benchmarks/results/round37/run2_call.sh
