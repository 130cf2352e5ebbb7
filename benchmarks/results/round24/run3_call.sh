#!/usr/bin/env bash
# twenty-fourth round, run 3: the shared split-K partials workspace: its A/B against a fresh allocation, then the
# GPU matrix (the nineteenth round's run6_suite.sh; test_small_m_gemm.py's GPU ids in two halves, run3_b_half*_ids.txt)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
git log -1 --format=%H > $FINAL/run3_commit.txt 2>/dev/null; git status --short | head >> $FINAL/run3_commit.txt
timeout 150 python3 benchmarks/results/round24/partials_ab.py $FINAL/run3_partials_ab.json > $FINAL/run3_partials_ab.txt 2>&1; echo "partials A/B rc $?" >> $FINAL/run3_rcs.txt
mkdir -p .scratch /tmp/suite
for h in 1 2; do cp benchmarks/results/round24/run3_b_half${h}_ids.txt .scratch/b_half$h.txt; done
OUT=/tmp/suite T=${T:-400} bash benchmarks/results/round19/run6_suite.sh > $FINAL/run3_suite_summary.txt 2>&1
tar czf $FINAL/run3_suite.tgz -C /tmp suite
cat $FINAL/run3_rcs.txt; tail -n 20 $FINAL/run3_partials_ab.txt; tail -n 30 $FINAL/run3_suite_summary.txt
