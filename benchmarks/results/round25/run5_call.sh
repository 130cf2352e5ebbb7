#!/usr/bin/env bash
# twenty-fifth round, run 5: INT8_GEMM_CONFIGS from run 4's sweep: bench mlp at M = 512-16384 (int8 per-token's large-M
# GEMMs are the Triton int8 GEMM), then test_linear_gpu.py on both backends (every provider against float64, with a
# 4100 x 200 x 328 shape for the new tiles) and the interpreter's int8 GEMM cases on the GPU machine
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run5_commit.txt 2>/dev/null; git status --short | head >> $OUT/run5_commit.txt
timeout 150 python3 -m fused_quant bench mlp --m 512,1024,4096,16384 --out /tmp/mlp > $OUT/run5_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run5_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run5_mlp.json 2>/dev/null
( FUSED_QUANT_BACKEND=triton_fp8 timeout 300 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -rf > $OUT/run5_tests_triton.txt 2>&1; echo "test_linear_gpu triton_fp8 rc $?" >> $OUT/run5_rcs.txt ) &
( FUSED_QUANT_BACKEND=hip_w8a8 timeout 300 python3 -m pytest -q -m "hip_w8a8" tests/gpu/test_linear_gpu.py -rf > $OUT/run5_tests_hip.txt 2>&1; echo "test_linear_gpu hip_w8a8 rc $?" >> $OUT/run5_rcs.txt ) &
wait
cat $OUT/run5_rcs.txt; grep "^mlp M=" $OUT/run5_bench_mlp.txt | cut -c1-330; for f in $OUT/run5_tests_*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head -5 | cut -c1-200; tail -n 1 $f; done
