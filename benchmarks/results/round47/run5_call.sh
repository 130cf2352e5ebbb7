#!/usr/bin/env bash
# forty-seventh round, run 5: the decode benches and the decode GPU tests (round 46's run1_call.sh) where the card is
# an H200; any other card ran them in run 2, so the call only names it and ends
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round46/run1_call.sh
fi
