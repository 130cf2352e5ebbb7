#!/usr/bin/env bash
# twenty-seventh round, run 3: on the table with run 1's int8 down row: bench gemm at M = 1, 16, 64 (the targets' token
# counts, every provider side by side), bench mlp --quick (eager and graph columns), bench host --quick
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
timeout 150 python3 -m fused_quant bench gemm --m 1,16,64 --out /tmp/gemm > $OUT/run3_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run3_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run3_gemm.json 2>/dev/null; cp /tmp/gemm/*.png $OUT/ 2>/dev/null
timeout 260 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run3_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run3_mlp.json 2>/dev/null
timeout 100 python3 -m fused_quant bench host --quick --out /tmp/host > $OUT/run3_bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/run3_rcs.txt
cp /tmp/host/host.json $OUT/run3_host.json 2>/dev/null
cat $OUT/run3_rcs.txt; grep "^mlp M=" $OUT/run3_bench_mlp.txt | cut -c1-330; grep -E "^gemm" $OUT/run3_bench_gemm.txt | cut -c1-220; tail -n 25 $OUT/run3_bench_host.txt | cut -c1-200
