#!/usr/bin/env bash
# twenty-eighth round, run 5: one-token tiles run 1 did not try, against the installed rows at one token (run5_tiles.py)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run5_commit.txt 2>/dev/null; git status --short | head >> $OUT/run5_commit.txt
timeout 330 python3 benchmarks/results/round28/run5_tiles.py $OUT/run5_tiles.json > $OUT/run5_tiles.txt 2>&1; echo "rc $?" >> $OUT/run5_tiles.txt
grep "^B \|failed\|time\|done\|rc\|Error" $OUT/run5_tiles.txt | cut -c1-200
