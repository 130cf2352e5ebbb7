#!/usr/bin/env bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
timeout 400 python3 .scratch/tma19.py > $OUT/tma19.txt 2>&1; echo "tma19 rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep -E "^best|failed" $OUT/tma19.txt | head -20 | cut -c1-300; grep "^trial" $OUT/tma19.txt | sort -t' ' -k9 -n | head -3
