#!/usr/bin/env bash
# twenty-first round, run 1: gate_up's GEMM applying the silu_and_mul producer of a per-tensor key in its
# epilogue: the MLP A/B (two calls / one kernel), then the GPU bits tests (the producing kernel, the MLP through
# linear_act_quant, the decode replay tests)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
timeout 240 python3 benchmarks/results/round21/run1_producing_ab.py > $OUT/run1_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run1_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 120 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/kernels/test_small_m_gemm.py -k "producing" -rf > $OUT/run1_tests.txt 2>&1; echo "tests kernel rc $?" >> $OUT/run1_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant or graph_and_compiled" -rf > $OUT/run1_tests_decode.txt 2>&1; echo "tests decode rc $?" >> $OUT/run1_rcs.txt
cat $OUT/run1_rcs.txt; tail -n 4 $OUT/run1_tests.txt; tail -n 4 $OUT/run1_tests_decode.txt; tail -n 30 $OUT/run1_ab.txt
