#!/usr/bin/env bash
# forty-first round, run 3: `bench gemm` with each peer the lesser of two passes (timing.timed_passes) on whatever card
# comes, and its targets; where the card is an H200 also bench host three times, bench mlp, the whole targets table,
# trace_mlp at 16 / 256 / 1024 tokens and the int8 sweep at 1024 / 4096 tokens (the H200 has not run the descriptor
# int8 GEMM); one archive back, the targets table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
h200=no; grep -q H200 $R/device.txt && h200=yes
if [ $h200 = yes ]; then
  for turn in 1 2 3; do
    timeout 100 python3 -m fused_quant bench host --out $R/host$turn > $R/bench_host$turn.txt 2>&1; echo "bench host $turn rc $?" >> $R/rcs.txt
  done
fi
timeout 260 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; echo "bench gemm rc $? at ${SECONDS} s" >> $R/rcs.txt
if [ $h200 = yes ]; then
  timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $? at ${SECONDS} s" >> $R/rcs.txt
  python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host?/host.json \
    --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1; echo "report rc $?" >> $R/rcs.txt
  timeout 60 python3 -m benchmarks.trace_mlp --m 16,256,1024 --calls 4 --out $R/trace > $R/trace.txt 2>&1; echo "trace rc $? at ${SECONDS} s" >> $R/rcs.txt
  left=$((575 - SECONDS)); [ $left -gt 30 ] && { timeout $left python3 -m benchmarks.sweep_int8_gemm --ms 1024,4096 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $? at ${SECONDS} s" >> $R/rcs.txt; }
else
  python3 -m benchmarks.report $R/gemm/gemm.json > $R/report.txt 2>&1; echo "report rc $?" >> $R/rcs.txt
fi
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt; grep "sum over shapes" $R/int8_sweep.txt 2>/dev/null | cut -c1-250
grep -E "^M=" $R/trace.txt 2>/dev/null | cut -c1-250; grep "^mlp M=" $R/bench_mlp.txt 2>/dev/null | cut -c1-250
sed -n '/decode targets/,$p' $R/report.txt | cut -c1-250
