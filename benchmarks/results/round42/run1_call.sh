#!/usr/bin/env bash
# forty-second round, run 1: the int8 per-token MLP under sustained load against a short timing, with SM clock,
# power and the power-cap flag sampled per phase (run1_sustained.py), at 1024 tokens, on whichever card came
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
SECONDS=0
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader > $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 240 python3 benchmarks/results/round42/run1_sustained.py 1024 $R/sustained.json > $R/sustained.txt 2>&1
echo "sustained rc $? at ${SECONDS} s" >> $R/rcs.txt
tar czf $OUT/run1.tgz -C /tmp run1
cat $R/device.txt $R/rcs.txt; grep -v "^{" $R/sustained.txt | tail -n 30 | cut -c1-200
