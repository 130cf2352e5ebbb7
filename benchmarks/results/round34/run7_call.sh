#!/usr/bin/env bash
# thirty-fourth round, run 7 (for an H200, with the little device time left): the final package's full bench mlp, a
# bench host turn, then bench gemm, each into $OUT as it finishes; the MLP and host lines last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7_device.txt
timeout 60 python3 -m fused_quant bench mlp --out $OUT/mlp > $OUT/run7_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run7_device.txt
timeout 30 python3 -m fused_quant bench host --out /tmp/host > $OUT/run7_bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/run7_device.txt
timeout 70 python3 -m fused_quant bench gemm --out $OUT/gemm > $OUT/run7_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run7_device.txt
cat $OUT/run7_device.txt; grep "^mlp M=" $OUT/run7_bench_mlp.txt | cut -c1-330; grep "^host" $OUT/run7_bench_host.txt | cut -c1-250
grep -E "^gemm" $OUT/run7_bench_gemm.txt | grep -E "M= +(1|16|64) " | cut -c1-110
