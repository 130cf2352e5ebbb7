#!/usr/bin/env bash
# fifty-first round, run 2: the fiftieth round's run1_call.sh as it is (bench mlp, host, gemm, the report, the
# decode GPU tests on triton_fp8), on the machine run 1 left warm
bash benchmarks/results/round50/run1_call.sh
