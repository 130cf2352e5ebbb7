#!/usr/bin/env bash
# twenty-second round, run 5 (PRODUCING_BUCKETS with 160 and 256): the producing kernel's GPU tests, the decode
# tests through linear_act_quant (now at 160 and 256 tokens too) on both backends, then bench mlp --quick
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run5_commit.txt 2>/dev/null; git status --short | head >> $OUT/run5_commit.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/kernels/test_small_m_gemm.py -k "linear_act_quant or producing" -rf > $OUT/run5_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run5_rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 120 python3 -m pytest -q -m "hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant" -rf > $OUT/run5_tests_hip.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $OUT/run5_rcs.txt
timeout 170 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run5_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run5_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run5_mlp.json; cp /tmp/mlp/*.png $OUT/ 2>/dev/null
cat $OUT/run5_rcs.txt; tail -n 2 $OUT/run5_tests_triton.txt $OUT/run5_tests_hip.txt; grep "^mlp M=" $OUT/run5_bench_mlp.txt | cut -c1-330
