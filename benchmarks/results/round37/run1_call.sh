#!/usr/bin/env bash
# thirty-seventh round, run 1: the decode benches on the package named in commits.txt (bench host three times, bench gemm,
# bench mlp), then the decode targets table over those files (python -m benchmarks.report, SQNR against round 31
# run 2's mlp.json); one archive back, the targets table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
for turn in 1 2 3; do
  timeout 100 python3 -m fused_quant bench host --out $R/host$turn > $R/bench_host$turn.txt 2>&1; echo "bench host $turn rc $?" >> $R/rcs.txt
done
timeout 150 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $R/rcs.txt
timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/rcs.txt
python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host?/host.json \
  --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1; echo "report rc $?" >> $R/rcs.txt
tar czf $OUT/run1.tgz -C /tmp run1
cat $R/device.txt $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | cut -c1-200
sed -n '/decode targets/,$p' $R/report.txt | cut -c1-250
