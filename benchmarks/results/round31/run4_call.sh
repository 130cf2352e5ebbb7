#!/usr/bin/env bash
# thirty-first round, run 4: int8 per-token quantizing in eager gate_up calls with the table row, a wider row, or off
# (run4_ab.py), on an H200; one archive back, the medians last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run4_device.txt
git status --short | head -20 >> $R/run4_device.txt
timeout 300 python3 benchmarks/results/round31/run4_ab.py 3 $R/run4_ab.json > $R/run4_ab.txt 2>&1; echo "ab rc $?" >> $R/run4_rcs.txt
tar czf $OUT/run4.tgz -C /tmp run4
cat $R/run4_device.txt $R/run4_rcs.txt; grep "^bits" $R/run4_ab.txt; sed -n "/^median over turns/,\$p" $R/run4_ab.txt
