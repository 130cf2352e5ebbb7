#!/usr/bin/env bash
# fortieth round, run 7: the decode benches and the targets table once more (round 37's run1_call.sh), a last try for
# an H200 with the session's device time left
bash benchmarks/results/round37/run1_call.sh
