#!/usr/bin/env bash
# fifty-first round, run 4: the whole GPU matrix (round 49's run1_call.sh, each row under T seconds, default 470;
# .whl carried) on this round's value checks (sparse and nested scales, registered functions' signatures, the
# numerics argument, the hip_w8a8 vendor call's operands and output) and quantizing_calls' --own-rows GPU test;
# asked for an H200, whichever card comes
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T=${T:-470} bash benchmarks/results/round49/run1_call.sh
