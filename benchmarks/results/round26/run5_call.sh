#!/usr/bin/env bash
# twenty-sixth round, run 5: the small-M search at 32 / 64 tokens for down, qkv and o with seven more tiles of 32- and
# 64-token blocks (TILES_WIDE), installed in this run's tree only; then each row it changed, old config against new,
# in turns (run4_rows_ab.py against the committed table)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run5_commit.txt 2>/dev/null; git status --short | head >> $OUT/run5_commit.txt
cp fused_quant/kernels/small_m_gemm_configs.json /tmp/committed_table.json
timeout 420 python3 -m benchmarks.sweep_small_m_gemm --out $OUT/s --ms 64,32 --shapes down,qkv,o --install > $OUT/run5_sweep.txt 2>&1
echo "sweep rc $?" >> $OUT/run5_sweep.txt
cp $OUT/s/sweep_small_m_gemm.log $OUT/run5_sweep_trials.log; cp $OUT/s/small_m_gemm_configs.json $OUT/run5_configs.json; rm -rf $OUT/s
timeout 150 python3 benchmarks/results/round26/run4_rows_ab.py /tmp/committed_table.json $OUT/run5_rows_ab.json > $OUT/run5_rows_ab.txt 2>&1; echo "rows A/B rc $?" >> $OUT/run5_rows_ab.txt
grep -E "M=|rc " $OUT/run5_sweep.txt | grep -v "^  " | cut -c1-200 | tail -n 14; cat $OUT/run5_rows_ab.txt | tail -n 14
