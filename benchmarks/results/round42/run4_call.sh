#!/usr/bin/env bash
# forty-second round, run 4: on an H200 the decode benches and their targets (round 37's run1_call.sh: bench host
# three times, bench gemm, bench mlp, now with sustained replays from 1024 tokens on); on another card bench mlp at
# 1024 / 4096 / 16384 tokens only (its graph and sustained columns)
SECONDS=0
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round37/run1_call.sh
else
  export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  R=/tmp/run4; mkdir -p $R
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
  git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
  timeout 250 python3 -m fused_quant bench mlp --m 1024,4096,16384 --out $R/mlp > $R/bench_mlp.txt 2>&1
  echo "bench mlp rc $? at ${SECONDS} s" >> $R/rcs.txt
  python3 -m benchmarks.report $R/mlp/mlp.json > $R/report.txt 2>&1
  tar czf $OUT/run4.tgz -C /tmp run4
  cat $R/device.txt $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c 1-400
  grep "MLP graph at\|MLP sustained\|^| 1024\|^| 4096\|^| 16384" $R/report.txt | cut -c1-300
fi
echo "done at ${SECONDS} s"
