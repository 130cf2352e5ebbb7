#!/usr/bin/env bash
# twenty-first round, run 8 (after the review fixes, 9097c59): the GPU tests of linear_act_quant on both backends and
# the producing kernel's
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/kernels/test_small_m_gemm.py -k "linear_act_quant or producing" -rf > $OUT/run8_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run8_rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 100 python3 -m pytest -q -m "hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant" -rf > $OUT/run8_tests_hip.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $OUT/run8_rcs.txt
cat $OUT/run8_rcs.txt; tail -n 1 $OUT/run8_tests_triton.txt $OUT/run8_tests_hip.txt
