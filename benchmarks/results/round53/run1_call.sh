#!/usr/bin/env bash
# fifty-third round, run 1: the whole GPU matrix (round 49's run1_call.sh, each row under T seconds, default 470;
# .whl carried) on the last round's final package (1f7f7de: the transformers experts entries and per-linear output
# dtype, the registration cleanup), then round 50's decode benches and decode GPU tests in the same call
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
T=${T:-470} bash benchmarks/results/round49/run1_call.sh
echo "matrix done at ${SECONDS} s"
bash benchmarks/results/round50/run1_call.sh
echo "decode done at ${SECONDS} s"
