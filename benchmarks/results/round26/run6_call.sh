#!/usr/bin/env bash
# twenty-sixth round, run 6: after run 5's rows at 32 / 64 tokens were installed: the GPU float64 cases of their configs
# (test_small_m_gemm.py cases 12-18) and test_linear_gpu.py on triton_fp8, side by side (what the device time left allowed)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run6_commit.txt 2>/dev/null; git status --short | head >> $OUT/run6_commit.txt
K="against_float64 and (case12 or case13 or case14 or case15 or case16 or case17 or case18)"
( FUSED_QUANT_BACKEND=triton_fp8 timeout 170 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/kernels/test_small_m_gemm.py -k "$K" -rf > $OUT/run6_cases.txt 2>&1; echo "float64 cases rc $?" >> $OUT/run6_rcs.txt ) &
( FUSED_QUANT_BACKEND=triton_fp8 timeout 170 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -rf > $OUT/run6_triton.txt 2>&1; echo "test_linear_gpu triton_fp8 rc $?" >> $OUT/run6_rcs.txt ) &
wait
cat $OUT/run6_rcs.txt; for f in $OUT/run6_cases.txt $OUT/run6_triton.txt; do grep -E "^(FAILED|ERROR)" $f | head -5 | cut -c1-200; tail -n 1 $f; done
