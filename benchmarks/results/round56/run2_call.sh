#!/usr/bin/env bash
# fifty-sixth round, run 2: bench mlp, bench host and bench gemm (each call timed back to back and after a foreign
# kernel), then the report over them (SQNR against round 31 run 2's mlp.json); the archive written after each step
# (then run2_hold.py: the replays timed with the stream idle and held, side by side)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run2.tgz -C /tmp run2; }
timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; save "bench mlp rc $?"
timeout 40 python3 -m fused_quant bench host --out $R/host > $R/bench_host.txt 2>&1; save "bench host rc $?"
timeout 200 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; save "bench gemm rc $?"
python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host/host.json \
  --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1; save "report rc $?"
cat $R/rcs.txt
grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-330
sed -n '/| target/,$p' $R/report.txt | cut -c1-230
timeout 150 python3 benchmarks/results/round56/run2_hold.py > $R/hold.txt 2>&1; save "hold A/B rc $?"
sed -n '/^summary/,$p' $R/hold.txt
