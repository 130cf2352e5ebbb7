#!/usr/bin/env bash
# twenty-eighth round, run 4: bench gemm at M = 1, 2, 16 and bench mlp --quick on the table with run 1's one-token rows,
# then benchmarks/profile_host.py --m 64 (the decode calls' host work at 64 tokens)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4_device.txt
timeout 100 python3 -m fused_quant bench gemm --m 1,2,16 --out /tmp/gemm > $OUT/run4_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run4_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run4_gemm.json 2>/dev/null; cp /tmp/gemm/gemm.png $OUT/run4_gemm.png 2>/dev/null
timeout 120 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run4_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run4_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run4_mlp.json 2>/dev/null
timeout 120 python3 -m benchmarks.profile_host --m 64 > $OUT/run4_profile_host.txt 2>&1; echo "profile_host rc $?" >> $OUT/run4_rcs.txt
cat $OUT/run4_rcs.txt; grep "^mlp M=" $OUT/run4_bench_mlp.txt | cut -c1-330; grep -E "^gemm" $OUT/run4_bench_gemm.txt | cut -c1-200; tail -n 25 $OUT/run4_profile_host.txt | cut -c1-200
