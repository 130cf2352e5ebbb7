#!/usr/bin/env bash
# twentieth round, run 8: the final commit's GPU rows of the small-M GEMM (both halves) and the decode / linear GPU
# tests on triton_fp8 and hip_w8a8, side by side
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
T=300
for h in 1 2; do
( FUSED_QUANT_BACKEND=triton_fp8 timeout $T python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" @.scratch/b_half$h.txt -rf > $OUT/small_m_b$h.txt 2>&1; echo "test_small_m_gemm half $h rc $?" >> $OUT/rcs.txt ) &
done
( FUSED_QUANT_BACKEND=triton_fp8 timeout $T python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/gpu/test_linear_gpu.py -rf > $OUT/decode_linear_triton.txt 2>&1; echo "decode+linear triton_fp8 rc $?" >> $OUT/rcs.txt ) &
( FUSED_QUANT_BACKEND=hip_w8a8 timeout $T python3 -m pytest -q -m hip_w8a8 tests/gpu/test_decode_gpu.py tests/gpu/test_linear_gpu.py tests/kernels/test_small_m_gemm.py -rf > $OUT/decode_linear_hip.txt 2>&1; echo "decode+linear+small-M hip_w8a8 rc $?" >> $OUT/rcs.txt ) &
wait
cat $OUT/rcs.txt; for f in $OUT/*.txt; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -5 | cut -c1-200; tail -n 1 $f | cut -c1-160; done
