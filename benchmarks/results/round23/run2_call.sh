#!/usr/bin/env bash
# twenty-third round, run 2: the driver launch against Triton's launcher, taking turns in one process
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null; git status --short | head >> $OUT/run2_commit.txt
timeout 300 python3 benchmarks/results/round23/run2_driver_interleaved.py $OUT/run2_driver_interleaved.json > $OUT/run2_driver_interleaved.txt 2>&1; echo "rc $?" >> $OUT/run2_rcs.txt
cat $OUT/run2_rcs.txt; tail -n 32 $OUT/run2_driver_interleaved.txt
