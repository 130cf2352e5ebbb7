#!/usr/bin/env bash
# thirty-sixth round, run 2: the whole GPU matrix on the final package (round 31's run1_call.sh, .whl carried; each
# row's limit 520 s); its logs and summary back
T=520 bash benchmarks/results/round31/run1_call.sh
grep -E "passed|failed|error|^NVIDIA| rc " $OUT/run1_suite_summary.txt | cut -c1-120
