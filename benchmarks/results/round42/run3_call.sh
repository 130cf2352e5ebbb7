#!/usr/bin/env bash
# forty-second round, run 3: many captures of the int8 MLP at 1024 tokens, each timed in four rounds
# (run3_graphs.py): is a slow replay a property of the graph; int8 GEMM without PDL and PDL off as arms
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
SECONDS=0
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 200 python3 benchmarks/results/round42/run3_graphs.py $R/graphs.json > $R/graphs.txt 2>&1
echo "graphs rc $? at ${SECONDS} s" >> $R/rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt; tail -n 40 $R/graphs.txt | cut -c1-250
