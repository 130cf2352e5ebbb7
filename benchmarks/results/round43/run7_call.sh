#!/usr/bin/env bash
# forty-third round, run 7 (the session's last device seconds): on an H200 bench mlp only (short and sustained
# replays), then its targets (SQNR against round 31 run 2's mlp.json); on another card nothing
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
cat $R/device.txt
grep -q H200 $R/device.txt || { echo "not an H200: stopped"; exit 0; }
timeout 120 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $? at ${SECONDS} s" >> $R/rcs.txt
python3 -m benchmarks.report $R/mlp/mlp.json --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1
tar czf $OUT/run7.tgz -C /tmp run7
cat $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-330
sed -n '/| target/,$p' $R/report.txt | cut -c1-230
