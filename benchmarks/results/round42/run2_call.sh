#!/usr/bin/env bash
# forty-second round, run 2: the state before the capture against the int8 MLP's graph time at 1024 tokens
# (run2_state.py), on whichever card came
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
SECONDS=0
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $R/clocks.csv 2>&1 &
timeout 280 python3 benchmarks/results/round42/run2_state.py $R/state.json > $R/state.txt 2>&1
echo "state rc $? at ${SECONDS} s" >> $R/rcs.txt
kill %1
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/device.txt $R/rcs.txt; grep -v "^{" $R/state.txt | tail -n 30 | cut -c1-330
