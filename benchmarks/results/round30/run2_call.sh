#!/usr/bin/env bash
# thirtieth round, run 2: where the MLP's GPU time goes on the final tree (benchmarks/trace_mlp.py at 1, 16 and 64
# tokens, its first GPU run), then bench mlp --quick, bench gemm at 1, 16 and 64 tokens and bench host --quick; every
# file under one folder, returned as one archive (a call returns at most 8 files); a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
git log -1 --format=%H > $R/run2_commit.txt 2>/dev/null; git status --short | head >> $R/run2_commit.txt
timeout 150 python3 -m benchmarks.trace_mlp --m 1,16,64 --out $R/trace > $R/run2_trace.txt 2>&1; echo "trace rc $?" >> $R/run2_rcs.txt
timeout 200 python3 -m fused_quant bench mlp --quick --out $R/mlp > $R/run2_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run2_rcs.txt
timeout 120 python3 -m fused_quant bench gemm --m 1,16,64 --out $R/gemm > $R/run2_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $R/run2_rcs.txt
timeout 80 python3 -m fused_quant bench host --quick --out $R/host > $R/run2_bench_host.txt 2>&1; echo "bench host rc $?" >> $R/run2_rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/run2_rcs.txt; grep "^M=" $R/run2_trace.txt | cut -c1-300; grep "^mlp M=" $R/run2_bench_mlp.txt | cut -c1-330
grep -E "^gemm" $R/run2_bench_gemm.txt | cut -c1-200; tail -n 6 $R/run2_bench_host.txt | cut -c1-220
