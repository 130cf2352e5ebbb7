#!/usr/bin/env bash
# thirty-third round, run 2, on run 1's machine: round 32's A/B of the int8 per-token quantizing call's rows
# (run2_ab.py, three turns), the full bench mlp (every M, eager and graph columns) and one bench host turn on the
# package with quantizing_config and KernelCall.fits; one archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run2_device.txt
git log -1 --format=%H >> $R/run2_device.txt; git status --short | head >> $R/run2_device.txt
timeout 200 python3 benchmarks/results/round32/run2_ab.py 3 $R/run2_ab.json > $R/run2_ab.txt 2>&1; echo "ab rc $?" >> $R/run2_rcs.txt
timeout 220 python3 -m fused_quant bench mlp --out $R/mlp > $R/run2_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run2_rcs.txt
timeout 100 python3 -m fused_quant bench host --out $R/host > $R/run2_bench_host.txt 2>&1; echo "bench host rc $?" >> $R/run2_rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cp $R/mlp/mlp.json $R/mlp/mlp.png $OUT/
cat $R/run2_device.txt $R/run2_rcs.txt
grep "^bits" $R/run2_ab.txt | grep -c equal
sed -n "/^median over turns/,\$p" $R/run2_ab.txt; grep "^mlp M=" $R/run2_bench_mlp.txt | cut -c1-330
grep -h "^host" $R/run2_bench_host.txt | cut -c1-250
