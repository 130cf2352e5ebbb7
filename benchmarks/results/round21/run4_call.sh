#!/usr/bin/env bash
# twenty-first round, run 4: the GPU matrix (the nineteenth round's run6_suite.sh unchanged, test_small_m_gemm.py's
# GPU ids in two halves, alternating, from run4_b_half*_ids.txt), its outputs in one archive
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
git log -1 --format=%H > $FINAL/run4_commit.txt 2>/dev/null; git status --short | head >> $FINAL/run4_commit.txt
mkdir -p .scratch /tmp/suite
for h in 1 2; do cp benchmarks/results/round21/run4_b_half${h}_ids.txt .scratch/b_half$h.txt; done
OUT=/tmp/suite T=${T:-420} bash benchmarks/results/round19/run6_suite.sh > $FINAL/run4_suite_summary.txt 2>&1
tar czf $FINAL/run4_suite.tgz -C /tmp suite
cat $FINAL/run4_commit.txt; tail -n 32 $FINAL/run4_suite_summary.txt
