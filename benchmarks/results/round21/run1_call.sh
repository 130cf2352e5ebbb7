#!/usr/bin/env bash
# twenty-first round, run 1: gate_up's GEMM applying the silu_and_mul producer of a per-tensor key in its
# epilogue: the GPU bits tests (the new producing kernel, the small-M GEMM's float64 and quantizing cases, the
# decode tests), then the MLP A/B (two calls / one kernel)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -x -m "gpu and not hip_w8a8" tests/kernels/test_small_m_gemm.py -k "producing or quantizing_kernel_is or against_float64" -rf > $OUT/run1_tests.txt 2>&1; FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -x -m "gpu and not hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant or graph_and_compiled" -rf >> $OUT/run1_tests.txt 2>&1; echo "tests rc $?" >> $OUT/run1_rcs.txt
timeout 300 python3 benchmarks/results/round21/run1_producing_ab.py > $OUT/run1_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run1_rcs.txt
cat $OUT/run1_rcs.txt; tail -n 3 $OUT/run1_tests.txt; cat $OUT/run1_ab.txt | tail -n 30
