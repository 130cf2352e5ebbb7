#!/usr/bin/env bash
# twenty-second round, run 3 (code of c88f720): the one-launch producing GEMM at the buckets left out (32, 160,
# 192, 256), the A/B of run 1 and the per-kernel profile at M = 32
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
MS=32,160,192,256 timeout 240 python3 benchmarks/results/round22/run3_buckets.py > $OUT/run3_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run3_rcs.txt
mv $OUT/run1_producing_ab.json $OUT/run3_producing_ab.json 2>/dev/null
PROFILE=1 MS=32 timeout 120 python3 benchmarks/results/round22/run3_buckets.py > $OUT/run3_profile.txt 2>&1; echo "profile rc $?" >> $OUT/run3_rcs.txt
MS=32,128 timeout 150 python3 benchmarks/results/round22/run3_buckets.py > $OUT/run3_ab2.txt 2>&1; echo "ab2 rc $?" >> $OUT/run3_rcs.txt
mv $OUT/run1_producing_ab.json $OUT/run3_producing_ab2.json 2>/dev/null
cat $OUT/run3_rcs.txt; grep "^M=" $OUT/run3_profile.txt | cut -c1-330; grep -hv "^ *$" $OUT/run3_ab.txt $OUT/run3_ab2.txt | grep -v Warn | cut -c1-420
