#!/usr/bin/env bash
# forty-eighth round, run 1: round 47's run1_call.sh on this round's package (an H200 runs the decode benches and
# tests; any other card the whole GPU matrix, .whl carried), whose transformers and CLI code changed since the last
# GPU matrix
bash benchmarks/results/round47/run1_call.sh
