#!/usr/bin/env bash
# twenty-second round, run 7: every sweep config of FP8 o / qkv at M = 8 and 16, then the sweep itself for them
# (--install on the device copy; the table comes back in $OUT)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run7_commit.txt 2>/dev/null; git status --short | head >> $OUT/run7_commit.txt
timeout 250 python3 benchmarks/results/round22/run7_trials.py > $OUT/run7_trials.txt 2>&1; echo "trials rc $?" >> $OUT/run7_rcs.txt
timeout 250 python3 benchmarks/sweep_small_m_gemm.py --kinds fp8 --shapes qkv,o --ms 8,16 --install --out $OUT/sweep > $OUT/run7_sweep.txt 2>&1; echo "sweep rc $?" >> $OUT/run7_rcs.txt
cp fused_quant/kernels/small_m_gemm_configs.json $OUT/run7_table_after.json
cat $OUT/run7_rcs.txt; cat $OUT/run7_trials.txt | cut -c1-200; tail -n 6 $OUT/run7_sweep.txt | cut -c1-250
