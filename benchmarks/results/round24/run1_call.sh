#!/usr/bin/env bash
# twenty-fourth round, run 1: bench host, then the GPU matrix at the final commit of the twenty-third round
# (the nineteenth round's run6_suite.sh unchanged; test_small_m_gemm.py's GPU ids in round 23's two halves,
# the same 253 ids as collected now)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
git log -1 --format=%H > $FINAL/run1_commit.txt 2>/dev/null; git status --short | head >> $FINAL/run1_commit.txt
timeout 90 python3 -m fused_quant bench host --quick --out /tmp/host > $FINAL/run1_bench_host.txt 2>&1; echo "bench host rc $?" >> $FINAL/run1_rcs.txt
cp /tmp/host/host.json $FINAL/run1_host.json 2>/dev/null
mkdir -p .scratch /tmp/suite
for h in 1 2; do cp benchmarks/results/round23/run4_b_half${h}_ids.txt .scratch/b_half$h.txt; done
OUT=/tmp/suite T=${T:-400} bash benchmarks/results/round19/run6_suite.sh > $FINAL/run1_suite_summary.txt 2>&1
tar czf $FINAL/run1_suite.tgz -C /tmp suite
cat $FINAL/run1_rcs.txt; grep "^host M=1" $FINAL/run1_bench_host.txt | cut -c1-400; tail -n 30 $FINAL/run1_suite_summary.txt
