#!/usr/bin/env bash
# thirty-ninth round, run 6: the bench's sequence for the int8 MLP at 1024 tokens, its kernels, then after a reset
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
timeout 150 python3 benchmarks/results/round39/run6_bench_sequence.py > $R/sequence.txt 2>&1; echo "sequence rc $?" >> $R/rcs.txt
tar czf $OUT/run6.tgz -C /tmp run6
cat $R/device.txt $R/rcs.txt; grep -v Warning $R/sequence.txt | cut -c1-200 | tail -40
