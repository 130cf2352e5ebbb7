#!/usr/bin/env bash
# twenty-second round, run 2 (the per-token epilogue's absmax along the tile's columns, no transpose): the
# per-kernel profile of the graph-replayed MLP, then the A/B of run 1 again at M = 1, 16, 64, 128
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null; git status --short | head >> $OUT/run2_commit.txt
timeout 200 python3 benchmarks/results/round22/run2_profile.py > $OUT/run2_profile.txt 2>&1; echo "profile rc $?" >> $OUT/run2_rcs.txt
MS=1,16,64,128 timeout 200 python3 benchmarks/results/round22/run1_producing_ab.py > $OUT/run2_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run2_rcs.txt
mv $OUT/run1_producing_ab.json $OUT/run2_producing_ab.json 2>/dev/null
cat $OUT/run2_rcs.txt; cut -c1-400 $OUT/run2_profile.txt | tail -n 20; grep -v "^ *$" $OUT/run2_ab.txt | tail -n 8 | cut -c1-420
