#!/usr/bin/env bash
# fifty-second round, run 2 (the machine of run 1, warm): round 50's run1_call.sh on this round's package: bench
# mlp, bench host, bench gemm, the decode targets over them, then the triton_fp8 decode GPU tests in the time left
bash benchmarks/results/round50/run1_call.sh
