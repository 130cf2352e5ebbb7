#!/usr/bin/env bash
# twenty-seventh round, run 4: run 1's fastest down tiles against every installed 32 / 64-token row of one token block
# (run4_rows_ab.py), then benchmarks/profile_host.py (where a decode call's host time goes)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
timeout 330 python3 benchmarks/results/round27/run4_rows_ab.py $OUT/run4_rows_ab.json > $OUT/run4_rows_ab.txt 2>&1; echo "rows A/B rc $?" >> $OUT/run4_rows_ab.txt
timeout 120 python3 -m benchmarks.profile_host > $OUT/run4_profile_host.txt 2>&1; echo "profile_host rc $?" >> $OUT/run4_profile_host.txt
cat $OUT/run4_rows_ab.txt; tail -n 30 $OUT/run4_profile_host.txt | cut -c1-200
