#!/usr/bin/env bash
# twenty-eighth round, run 1: the one-token blocks' GPU tests (the float64 cases, the quantizing and one-launch split-K
# cases of their configs), then run1_gemv.py (one-token tiles against the installed rows at 1 / 2 / 4 tokens)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1_device.txt
timeout 110 python3 -m pytest -q -p no:cacheprovider $(cat benchmarks/results/round28/run1_ids.txt) > $OUT/run1_tests.txt 2>&1; echo "tests rc $?" >> $OUT/run1_tests.txt
timeout 470 python3 benchmarks/results/round28/run1_gemv.py $OUT/run1_gemv.json > $OUT/run1_gemv.txt 2>&1; echo "rc $?" >> $OUT/run1_gemv.txt
tail -n 4 $OUT/run1_tests.txt; grep "^B \|failed\|time\|done\|rc\|Error" $OUT/run1_gemv.txt | cut -c1-200
