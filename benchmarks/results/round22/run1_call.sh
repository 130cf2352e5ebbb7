#!/usr/bin/env bash
# twenty-second round, run 1: gate_up's GEMM applying a per-token key's silu_and_mul producer (the activation and
# its absmax parts in the epilogue, then the split rows' quantizing launch): the MLP A/B (two calls / one path),
# the producing kernel's GPU tests and the decode tests through linear_act_quant on both backends
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
timeout 240 python3 benchmarks/results/round22/run1_producing_ab.py > $OUT/run1_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run1_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py tests/gpu/test_decode_gpu.py -k "producing or linear_act_quant or graph_and_compiled" -rf > $OUT/run1_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run1_rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 100 python3 -m pytest -q -m "hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant" -rf > $OUT/run1_tests_hip.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $OUT/run1_rcs.txt
cat $OUT/run1_rcs.txt; tail -n 3 $OUT/run1_tests_triton.txt $OUT/run1_tests_hip.txt; grep -v "^ *$" $OUT/run1_ab.txt | tail -n 24 | cut -c1-420
