#!/usr/bin/env bash
# twenty-eighth round, run 2: the GPU float64 cases of token blocks of 2 and 4 and one split-K case of them, then
# run2_lanes.py (token blocks of 1, 2 and 4 on the CUDA cores against the installed rows at 1 / 2 / 4 tokens)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null; git status --short | head >> $OUT/run2_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2_device.txt
timeout 100 python3 -m pytest -q -p no:cacheprovider $(cat benchmarks/results/round28/run2_ids.txt) > $OUT/run2_tests.txt 2>&1; echo "tests rc $?" >> $OUT/run2_tests.txt
timeout 460 python3 benchmarks/results/round28/run2_lanes.py $OUT/run2_lanes.json > $OUT/run2_lanes.txt 2>&1; echo "rc $?" >> $OUT/run2_lanes.txt
tail -n 4 $OUT/run2_tests.txt; grep "^B \|failed\|time\|done\|rc\|Error" $OUT/run2_lanes.txt | cut -c1-200
