#!/usr/bin/env bash
# fifty-second round, run 1: the whole GPU matrix (round 49's run1_call.sh, each row under T seconds, default 470;
# .whl carried) on the fifty-first round's package, none of whose value checks has run on a GPU; whichever card comes
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
T=${T:-470} bash benchmarks/results/round49/run1_call.sh
