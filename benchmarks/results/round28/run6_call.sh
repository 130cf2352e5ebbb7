#!/usr/bin/env bash
# twenty-eighth round, run 6: narrower one-token tiles than run 5 tried, against the installed rows at one token (run6_tiles.py)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run6_commit.txt 2>/dev/null; git status --short | head >> $OUT/run6_commit.txt
timeout 330 python3 benchmarks/results/round28/run6_tiles.py $OUT/run6_tiles.json > $OUT/run6_tiles.txt 2>&1; echo "rc $?" >> $OUT/run6_tiles.txt
grep "^B \|failed\|time\|done\|rc\|Error" $OUT/run6_tiles.txt | cut -c1-200
