#!/usr/bin/env bash
# thirty-third round, run 7 (planned, not run yet; for an H200 where one is given): benchmarks/quantizing_calls.py
# on the four Llama-3-8B shapes, int8 and FP8 per-token, 1-16 tokens: each quantizing call's config against the
# producer then the GEMM, bits compared (what quantizing_config should pick, measured); its files back, table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7_device.txt
timeout 540 python3 -m benchmarks.quantizing_calls --out $OUT/run7 > $OUT/run7_log.txt 2>&1; echo "rc $?" >> $OUT/run7_device.txt
cat $OUT/run7_device.txt; grep -E "x[0-9]|\*" $OUT/run7/quantizing_calls.txt | cut -c1-150 | tail -n 60
