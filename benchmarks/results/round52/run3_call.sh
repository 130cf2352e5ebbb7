#!/usr/bin/env bash
# fifty-second round, run 3, asked for an H200 (the targets' card; none since the forty-first round): round 50's
# run1_call.sh (bench mlp, bench host, bench gemm, the decode targets, then the triton_fp8 decode GPU tests) on
# this round's package; device.txt names the card that came
bash benchmarks/results/round50/run1_call.sh
