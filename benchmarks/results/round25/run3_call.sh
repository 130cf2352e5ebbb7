#!/usr/bin/env bash
# twenty-fifth round, run 3: with the partials workspace on main: bench host --quick (host time per call), bench mlp
# (7 rounds: a second sample of the graph ratios at M = 16) and bench gemm at every M bucket of the issue (its fit)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
timeout 100 python3 -m fused_quant bench host --quick --out /tmp/host > $OUT/run3_bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/run3_rcs.txt
cp /tmp/host/host.json $OUT/run3_host.json 2>/dev/null
timeout 240 python3 -m fused_quant bench mlp --out /tmp/mlp > $OUT/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run3_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run3_mlp.json 2>/dev/null; cp /tmp/mlp/mlp.png $OUT/run3_mlp.png 2>/dev/null
timeout 220 python3 -m fused_quant bench gemm --out /tmp/gemm > $OUT/run3_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run3_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run3_gemm.json 2>/dev/null; cp /tmp/gemm/gemm.png $OUT/run3_gemm.png 2>/dev/null
cat $OUT/run3_rcs.txt; grep "^host M=1" $OUT/run3_bench_host.txt | cut -c1-400; grep "^mlp M=" $OUT/run3_bench_mlp.txt | cut -c1-330; grep -E "^fit" $OUT/run3_bench_gemm.txt | cut -c1-200
