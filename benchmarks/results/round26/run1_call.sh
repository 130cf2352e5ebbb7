#!/usr/bin/env bash
# twenty-sixth round, run 1: the small-M GEMM's search at M = 64 and 32 with narrower token blocks side by side
# (16-token blocks at both, 32-token blocks at 64); no install. Every config's time is in the log.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
timeout 560 python3 -m benchmarks.sweep_small_m_gemm --out $OUT/s --ms 64,32 > $OUT/run1_sweep.txt 2>&1
echo "sweep rc $?" >> $OUT/run1_sweep.txt
cp $OUT/s/sweep_small_m_gemm.log $OUT/run1_sweep_trials.log; cp $OUT/s/small_m_gemm_configs.json $OUT/run1_configs.json; rm -rf $OUT/s
grep -E "M=|rc " $OUT/run1_sweep.txt | grep -v "^  " | cut -c1-230 | tail -n 30
