#!/usr/bin/env bash
# forty-seventh round, run 6: the lead A/B (run6_lead_ab.py) on whichever card comes (170 s at most), then, on an H200
# only, round 46's run1_call.sh (the decode benches, now timed with the lead)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
timeout 170 python3 benchmarks/results/round47/run6_lead_ab.py $OUT > $OUT/lead_ab.txt 2>&1; echo "lead ab rc $?"
grep "^|" $OUT/lead_ab.txt
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round46/run1_call.sh
fi
