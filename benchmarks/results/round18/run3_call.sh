#!/usr/bin/env bash
# round 18 final call: the wide silu rows on / off in turns, alone on the GPU; then the GPU matrix, its rows side by
# side (test_small_m_gemm in two halves of its collected ids)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
echo "commit $(cat .scratch/commit.txt)" > $FINAL/commit.txt
timeout 110 python3 .scratch/ab18c.py > $FINAL/ab18c.txt 2>&1; echo "ab18c rc $?" > $FINAL/rcs_pre.txt
mkdir -p /tmp/suite
( timeout 300 python3 .scratch/fill18.py > $FINAL/fill18.txt 2>&1; echo "fill18 rc $?" >> $FINAL/rcs_pre.txt ) &
FILL=$!
OUT=/tmp/suite T=${T:-430} bash .scratch/suite18.sh > $FINAL/suite_summary.txt 2>&1
wait $FILL
tar czf $FINAL/suite.tgz -C /tmp suite
cat $FINAL/commit.txt $FINAL/rcs_pre.txt; grep "fill kernels" $FINAL/fill18.txt; grep -v "^raw" $FINAL/ab18c.txt | cut -c1-330; tail -n 32 $FINAL/suite_summary.txt
