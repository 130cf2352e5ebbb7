#!/usr/bin/env bash
# thirty-third round, run 1: the whole GPU matrix on the final tree (round 31's run1_call.sh, .whl carried; each
# row's limit 520 s, the H100 took the triton_fp8 row past 450 in round 32); its logs and summary back
T=520 bash benchmarks/results/round31/run1_call.sh
tail -n 16 $OUT/run1_suite_summary.txt
