#!/usr/bin/env bash
# twenty-fifth round, run 4: the Triton scaled int8 GEMM's tile configs at M = 512-16384 (benchmarks/sweep_int8_gemm.py):
# int8 per-token's MLP at M >= 1024 took 1.30-1.37x bf16 in runs 2-3, against FP8's 1.75-1.89x
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
timeout 500 python3 -m benchmarks.sweep_int8_gemm --out $OUT > $OUT/run4_sweep.txt 2>&1; echo "sweep rc $?" >> $OUT/run4_sweep.txt
grep -E "^M=|rc |Error|error" $OUT/run4_sweep.txt | cut -c1-260 | tail -n 40
