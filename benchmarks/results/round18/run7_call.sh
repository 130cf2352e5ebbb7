#!/usr/bin/env bash
# round 18 run 7 (on the machine that a first attempt of run 5, stopped by an import error in its script, started); .scratch/m224c.py is run7_*_script.py here
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 60 python3 .scratch/m224c.py > $OUT/m224.txt 2>&1; echo "m224 rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep "M=" $OUT/m224.txt | cut -c1-600
