#!/usr/bin/env bash
# fortieth round, run 6 (run 5's machine, the command as it ran, on one line): run 5's A/B again at 512 / 1024 / 4096 tokens
mkdir -p $OUT && R=/tmp/run6 && mkdir -p $R && export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt && timeout 150 python3 benchmarks/results/round40/run5_int8_pdl_ab.py 512,1024,4096 $R/pdl_ab.json > $R/pdl_ab.txt 2>&1; echo "pdl ab rc $?" >> $R/rcs.txt; tar czf $OUT/run6.tgz -C /tmp run6; cat $R/device.txt $R/rcs.txt; grep -v "^{" $R/pdl_ab.txt | cut -c1-260
