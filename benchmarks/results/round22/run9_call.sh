#!/usr/bin/env bash
# twenty-second round, run 9 (run 8's tree; run 8's test line matched too much and ran out of time): the chain /
# table test and the split-K graph and two-stream tests of the small-M GEMM
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run9_commit.txt 2>/dev/null; git status --short | head >> $OUT/run9_commit.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py -k "chain_picks or graph_replay_is_bitwise or one_bound_split_k" -rf > $OUT/run9_tests.txt 2>&1; echo "tests rc $?" >> $OUT/run9_rcs.txt
cat $OUT/run9_rcs.txt; tail -n 3 $OUT/run9_tests.txt
