#!/usr/bin/env bash
# twenty-eighth round, run 7: one-warp one-token tiles, against the installed rows at one token (run7_tiles.py)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run7_commit.txt 2>/dev/null; git status --short | head >> $OUT/run7_commit.txt
timeout 330 python3 benchmarks/results/round28/run7_tiles.py $OUT/run7_tiles.json > $OUT/run7_tiles.txt 2>&1; echo "rc $?" >> $OUT/run7_tiles.txt
grep "^B \|failed\|time\|done\|rc\|Error" $OUT/run7_tiles.txt | cut -c1-200
