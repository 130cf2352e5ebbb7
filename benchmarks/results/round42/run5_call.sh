#!/usr/bin/env bash
# forty-second round, run 5 (the H100 of run 4, warm): the whole GPU matrix, each row under 330 s (round 37's run2_call.sh), .whl carried
T=330 bash benchmarks/results/round37/run2_call.sh
