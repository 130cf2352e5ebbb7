#!/usr/bin/env bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
timeout 200 python3 .scratch/eager48.py > $OUT/eager48.txt 2>&1; echo "eager48 rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep "^turn" $OUT/eager48.txt | cut -c1-300
