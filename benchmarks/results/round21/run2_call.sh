#!/usr/bin/env bash
# twenty-first round, run 2: gate_up's GEMM with and without the producer in its epilogue, alone (the table's
# configs, other configs at M = 32, registers and spills); the GPU bits tests of the producing kernel and of
# the MLP through linear_act_quant (after run 1's test fixes); the MLP A/B again with run 1's script (the negative record; its "fused" column now counts the records of two calls too)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null; git status --short | head >> $OUT/run2_commit.txt
timeout 200 python3 benchmarks/results/round21/run2_producing_gemm.py > $OUT/run2_gemm.txt 2>&1; echo "gemm rc $?" >> $OUT/run2_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 100 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/kernels/test_small_m_gemm.py -k "producing" -rf > $OUT/run2_tests.txt 2>&1; echo "tests kernel rc $?" >> $OUT/run2_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 100 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant" -rf > $OUT/run2_tests_decode.txt 2>&1; echo "tests decode rc $?" >> $OUT/run2_rcs.txt
MS=1,16,32,64 timeout 120 python3 benchmarks/results/round21/run1_producing_ab.py > $OUT/run2_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run2_rcs.txt
cat $OUT/run2_rcs.txt; tail -n 2 $OUT/run2_tests.txt; tail -n 2 $OUT/run2_tests_decode.txt; grep -v "^compiled" $OUT/run2_gemm.txt | tail -n 40; grep "^compiled" $OUT/run2_gemm.txt | head -30; grep -A1 "^M=" $OUT/run2_ab.txt
