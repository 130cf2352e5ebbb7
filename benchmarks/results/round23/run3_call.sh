#!/usr/bin/env bash
# twenty-third round, run 3: per-token silu_and_mul producer under capture, split rows vs one program per row
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
MS=1,4,16,32,64 timeout 400 python3 benchmarks/results/round23/run3_token_rows_ab.py > $OUT/run3_token_rows_ab.txt 2>&1; echo "rc $?" >> $OUT/run3_rcs.txt
cat $OUT/run3_rcs.txt; tail -n 12 $OUT/run3_token_rows_ab.txt
