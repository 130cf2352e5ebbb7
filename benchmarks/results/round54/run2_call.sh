#!/usr/bin/env bash
# fifty-fourth round, run 2 (the same machine as run 1, warm): the decode benches and decode GPU tests, round 50's
# run1_call.sh as it stands (bench mlp, bench host, bench gemm, the report, tests/gpu/test_decode_gpu.py on
# triton_fp8); the working tree copied again, so the table holds the committed gate_up row, not run 1's install
bash benchmarks/results/round50/run1_call.sh
