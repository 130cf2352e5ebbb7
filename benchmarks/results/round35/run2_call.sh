#!/usr/bin/env bash
# thirty-fifth round, run 2: run2_fewtoken.py (few-token blocks on the CUDA cores, plain and dp4a, against the
# installed rows at 1-8 tokens); its log back, the summary last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2_fewtoken.txt
timeout 480 python3 benchmarks/results/round35/run2_fewtoken.py >> $OUT/run2_fewtoken.txt 2>&1; echo "rc $?" >> $OUT/run2_fewtoken.txt
grep -v "^ \|us$" $OUT/run2_fewtoken.txt | tail -n 40
