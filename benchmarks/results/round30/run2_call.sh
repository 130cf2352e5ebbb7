#!/usr/bin/env bash
# thirtieth round, run 2 (planned, not run yet): where the MLP's GPU time goes on the final tree
# (benchmarks/trace_mlp.py at 1, 16 and 64 tokens, its first GPU run), then bench mlp --quick, bench gemm at 1, 16
# and 64 tokens and bench host --quick; a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null; git status --short | head >> $OUT/run2_commit.txt
timeout 150 python3 -m benchmarks.trace_mlp --m 1,16,64 --out $OUT/trace > $OUT/run2_trace.txt 2>&1; echo "trace rc $?" >> $OUT/run2_rcs.txt
timeout 200 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run2_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run2_rcs.txt
cp /tmp/mlp/mlp.json /tmp/mlp/mlp.png $OUT/ 2>/dev/null
timeout 120 python3 -m fused_quant bench gemm --m 1,16,64 --out /tmp/gemm > $OUT/run2_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run2_rcs.txt
cp /tmp/gemm/gemm.json /tmp/gemm/gemm.png $OUT/ 2>/dev/null
timeout 80 python3 -m fused_quant bench host --quick --out /tmp/host > $OUT/run2_bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/run2_rcs.txt
cp /tmp/host/host.json $OUT/ 2>/dev/null
cat $OUT/run2_rcs.txt; grep "^M=" $OUT/run2_trace.txt | cut -c1-300; grep "^mlp M=" $OUT/run2_bench_mlp.txt | cut -c1-330
grep -E "^gemm" $OUT/run2_bench_gemm.txt | cut -c1-200; tail -n 6 $OUT/run2_bench_host.txt | cut -c1-220
