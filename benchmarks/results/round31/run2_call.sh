#!/usr/bin/env bash
# thirty-first round, run 2 (planned, not run yet): the decode benches on the final tree on an H200 (trace_mlp at 1,
# 16 and 64 tokens, bench host, gemm and mlp), bench host twice more (the thirtieth round's H100 host gave FP8
# per-token's eager MLP 124.1 us against 69.6-73.1 for the other keys, in one run), profile_host at one token,
# and the GPU variant of the host-calls test; one archive back; a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run2_device.txt
git status --short | head >> $R/run2_device.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_bench_cli.py -k host_calls > $R/run2_test.txt 2>&1; echo "test rc $?" >> $R/run2_rcs.txt
timeout 90 python3 -m benchmarks.trace_mlp --m 1,16,64 --out $R/trace > $R/run2_trace.txt 2>&1; echo "trace rc $?" >> $R/run2_rcs.txt
for turn in 1 2 3; do
  timeout 100 python3 -m fused_quant bench host --out $R/host$turn > $R/run2_bench_host$turn.txt 2>&1; echo "bench host $turn rc $?" >> $R/run2_rcs.txt
done
timeout 150 python3 -m fused_quant bench gemm --out $R/gemm > $R/run2_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $R/run2_rcs.txt
timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/run2_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run2_rcs.txt
timeout 150 python3 -m benchmarks.profile_host --m 1 --top 12 > $R/run2_profile_host.txt 2>&1; echo "profile_host rc $?" >> $R/run2_rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/run2_device.txt $R/run2_rcs.txt; tail -n 1 $R/run2_test.txt; grep "^mlp M=" $R/run2_bench_mlp.txt | cut -c1-330
grep -h "^host" $R/run2_bench_host?.txt | cut -c1-250; grep -E "^gemm" $R/run2_bench_gemm.txt | grep -E "M=  ( 1| 16| 64)" | cut -c1-120
