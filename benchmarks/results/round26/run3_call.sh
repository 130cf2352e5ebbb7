#!/usr/bin/env bash
# twenty-sixth round, run 3: after the small-M rows at 32 / 64 tokens (run 1's search, installed in 6fed4a2):
# bench gemm at M = 32, 64 (every provider side by side) and bench mlp --quick (eager and graph columns)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
timeout 200 python3 -m fused_quant bench gemm --m 32,64 --out /tmp/gemm > $OUT/run3_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run3_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run3_gemm.json 2>/dev/null
timeout 260 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run3_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run3_mlp.json 2>/dev/null
cat $OUT/run3_rcs.txt; grep "^mlp M=" $OUT/run3_bench_mlp.txt | cut -c1-330; grep -E "^gemm" $OUT/run3_bench_gemm.txt | cut -c1-220
