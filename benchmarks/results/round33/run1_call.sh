#!/usr/bin/env bash
# thirty-third round, run 1 (planned, not run yet; for an H200, about 7 minutes there): the whole GPU matrix
# (round 31's run1_call.sh, .whl carried), then round 32's run2_call.sh alone on the GPU (quantizing_config's bits
# test, the A/B of the int8 per-token quantizing call's rows, bench mlp --quick at 1 / 16 / 64 tokens): the eager
# int8 per-token MLP at one token on an H200 with quantizing_config and KernelCall.fits. Two archives back.
bash benchmarks/results/round31/run1_call.sh
bash benchmarks/results/round32/run2_call.sh
tail -n 16 $OUT/run1_suite_summary.txt
