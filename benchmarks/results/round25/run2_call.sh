#!/usr/bin/env bash
# twenty-fifth round, run 2: the partials workspace's A/B against a fresh allocation per call (round24/partials_ab.py),
# then bench mlp --quick (eager and graph columns) and bench gemm --quick at M = 1, 4, 16 (its stream fit)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null; git status --short | head >> $OUT/run2_commit.txt
timeout 130 python3 benchmarks/results/round24/partials_ab.py $OUT/run2_partials_ab.json > $OUT/run2_partials_ab.txt 2>&1; echo "partials A/B rc $?" >> $OUT/run2_rcs.txt
timeout 230 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run2_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run2_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run2_mlp.json 2>/dev/null; cp /tmp/mlp/mlp.png $OUT/run2_mlp.png 2>/dev/null
timeout 200 python3 -m fused_quant bench gemm --quick --m 1,4,16 --out /tmp/gemm > $OUT/run2_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run2_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run2_gemm.json 2>/dev/null; cp /tmp/gemm/gemm.png $OUT/run2_gemm.png 2>/dev/null
cat $OUT/run2_rcs.txt; tail -n 14 $OUT/run2_partials_ab.txt; grep "^mlp M=" $OUT/run2_bench_mlp.txt | cut -c1-330; grep -E "^gemm|^fit" $OUT/run2_bench_gemm.txt | cut -c1-200
