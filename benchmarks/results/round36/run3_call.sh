#!/usr/bin/env bash
# thirty-sixth round, run 3: a second sample of the final package's decode benches (bench mlp, bench host twice; on
# an H200 bench gemm and a third host turn too), then the targets table over this run's files; one archive back
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
turns="1 2"; files="$R/mlp/mlp.json"
if grep -q H200 $R/device.txt; then
  turns="1 2 3"
  timeout 150 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $R/rcs.txt
  files="$R/gemm/gemm.json $files"
fi
for turn in $turns; do
  timeout 100 python3 -m fused_quant bench host --out $R/host$turn > $R/bench_host$turn.txt 2>&1; echo "bench host $turn rc $?" >> $R/rcs.txt
done
timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/rcs.txt
python3 -m benchmarks.report $files $R/host?/host.json --sqnr-baseline benchmarks/results/round31/run2_mlp.json \
  > $R/report.txt 2>&1; echo "report rc $?" >> $R/rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | cut -c1-200
sed -n '/| target |/,$p' $R/report.txt | cut -c1-200
