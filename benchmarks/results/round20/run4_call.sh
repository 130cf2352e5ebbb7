#!/usr/bin/env bash
# twentieth round, run 4: the GPU matrix, its rows side by side (test_small_m_gemm in two halves of its
# collected ids, balanced by round 19's times; this comment corrected after the run)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
echo "commit $(cat .scratch/commit.txt)" > $FINAL/commit.txt
git status --short | head >> $FINAL/commit.txt
mkdir -p /tmp/suite
OUT=/tmp/suite T=${T:-480} bash .scratch/suite20.sh > $FINAL/suite_summary.txt 2>&1
tar czf $FINAL/suite.tgz -C /tmp suite
cat $FINAL/commit.txt; tail -n 32 $FINAL/suite_summary.txt
