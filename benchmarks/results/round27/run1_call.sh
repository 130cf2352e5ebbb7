#!/usr/bin/env bash
# twenty-seventh round, run 1: down at 64 tokens over tiles the sweep does not try, the fastest against the installed
# row in turns (run1_down64.py)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1_device.txt
timeout 400 python3 benchmarks/results/round27/run1_down64.py $OUT/run1_down64.json > $OUT/run1_down64.txt 2>&1; echo "rc $?" >> $OUT/run1_down64.txt
grep -v "^  " $OUT/run1_down64.txt | cut -c1-260
