#!/usr/bin/env bash
# twenty-second round, run 6 (the code of run 5): bench gemm --quick at M = 1-16 and 64 (the GEMM targets, not
# re-measured since the nineteenth round) and bench host --quick (host per call at M = 1)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run6_commit.txt 2>/dev/null; git status --short | head >> $OUT/run6_commit.txt
timeout 300 python3 -m fused_quant bench gemm --quick --m 1,2,4,8,16,64 --out /tmp/gemm > $OUT/run6_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run6_rcs.txt
cp /tmp/gemm/*.json $OUT/ 2>/dev/null; for f in /tmp/gemm/*.png; do cp "$f" "$OUT/run6_$(basename $f)"; done 2>/dev/null
timeout 150 python3 -m fused_quant bench host --quick --out /tmp/host > $OUT/run6_bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/run6_rcs.txt
cp /tmp/host/*.json $OUT/ 2>/dev/null
cat $OUT/run6_rcs.txt; grep -v "^ *$" $OUT/run6_bench_gemm.txt | tail -n 40 | cut -c1-250; tail -n 25 $OUT/run6_bench_host.txt | cut -c1-250
