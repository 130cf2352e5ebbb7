#!/usr/bin/env bash
# fifty-first round, run 1: the whole GPU matrix on this round's package, whichever card comes (round 49's
# run1_call.sh, each row under T seconds, default 470; .whl carried): the fiftieth round's package after its last
# GPU matrix (5e17917): registration, CLI, the swept-row cache on the GPU selection path, --own-rows
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T=${T:-470} bash benchmarks/results/round49/run1_call.sh
