#!/usr/bin/env bash
# thirty-eighth round, run 5: the two changes after run 4 that no GPU ran, briefly: fused-quant probe's small-M section
# (its int8 tiles line) and sweep_int8_gemm with its thrown-away first timing (down at 1024 tokens); a short table
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
timeout 40 python3 -m fused_quant probe > $R/probe.txt 2>&1; echo "probe rc $?" >> $R/rcs.txt
timeout 60 python3 -m benchmarks.sweep_int8_gemm --ms 1024 --shapes down --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
tar czf $OUT/run5.tgz -C /tmp run5
cat $R/device.txt $R/rcs.txt; sed -n '/^small-M/,/^[a-z]/p' $R/probe.txt | head -8
head -1 $R/int8_sweep.txt | cut -c1-200; grep -E "^int8|sum over" $R/int8_sweep.txt | cut -c1-200
python3 -c "
import json; d=json.load(open('$R/int8/int8_gemm_sweep.json')); r=d['rows'][0]
print('installed', round(r['us']['installed'],1), 'same tile as a candidate', round(r['configs']['(128, 256, 128, 16, 8, 3)']['us'],1))"
