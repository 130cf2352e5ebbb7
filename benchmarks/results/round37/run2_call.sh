#!/usr/bin/env bash
# thirty-seventh round, run 2: the whole GPU matrix on the package named in commits.txt (round 31's run1_call.sh, .whl carried; each
# row's limit 520 s unless T is set); its logs and summary back
T=${T:-520} bash benchmarks/results/round31/run1_call.sh
grep -E "passed|failed|error|^NVIDIA| rc " $OUT/run1_suite_summary.txt | cut -c1-120
