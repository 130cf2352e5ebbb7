#!/usr/bin/env bash
# twenty-fourth round, run 4: bench mlp --quick (eager and graph columns with the shared partials workspace), then
# bench gemm --quick at M = 1, 4, 16 (its stream fit printed and stored)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
timeout 260 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run4_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run4_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run4_mlp.json 2>/dev/null; cp /tmp/mlp/mlp.png $OUT/run4_mlp.png 2>/dev/null
timeout 200 python3 -m fused_quant bench gemm --quick --m 1,4,16 --out /tmp/gemm > $OUT/run4_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run4_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run4_gemm.json 2>/dev/null; cp /tmp/gemm/gemm.png $OUT/run4_gemm.png 2>/dev/null
cat $OUT/run4_rcs.txt; grep "^mlp M=" $OUT/run4_bench_mlp.txt | cut -c1-330; grep -E "^gemm|^fit" $OUT/run4_bench_gemm.txt | cut -c1-200
