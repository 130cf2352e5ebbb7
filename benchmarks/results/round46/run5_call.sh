#!/usr/bin/env bash
# forty-sixth round, run 5: the decode benches (run1_call.sh) where the card is an H200; any other card ran them in
# runs 3 and 4, so the call only names it and ends
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round46/run1_call.sh
fi
