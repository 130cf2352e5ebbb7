#!/usr/bin/env bash
# round 17 call 2: the table retimed beside the new scaled_mm way (installed on this machine), the new GPU
# tests, bench mlp and gemm, the silu producer's warps, then the decode / linear GPU tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
mkdir -p $OUT/sweep
timeout 240 python3 -m benchmarks.sweep_small_m_gemm --out $OUT/sweep --retime --install > $OUT/retime.txt 2>&1; echo "retime rc $?" >> $OUT/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m gpu tests/kernels/test_small_m_gemm.py -k "scaled_mm or chain_picks" -rf > $OUT/tests_new.txt 2>&1; echo "new tests rc $?" >> $OUT/rcs.txt
timeout 300 python3 -m fused_quant bench mlp --quick --out $OUT/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/rcs.txt
timeout 200 python3 -m fused_quant bench gemm --quick --out $OUT/gemm > $OUT/bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/rcs.txt
timeout 120 python3 .scratch/exp17b.py > $OUT/exp17b.txt 2>&1; echo "exp17b rc $?" >> $OUT/rcs.txt
( FUSED_QUANT_BACKEND=triton_fp8 timeout 300 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/gpu/test_decode_gpu.py tests/gpu/test_linear_gpu.py -rf > $OUT/tests_decode_linear_fp8.txt 2>&1; echo "decode+linear triton_fp8 rc $?" >> $OUT/rcs.txt ) &
( FUSED_QUANT_BACKEND=hip_w8a8 timeout 300 python3 -m pytest -q -m "gpu and not triton_fp8" tests/gpu/test_decode_gpu.py tests/gpu/test_linear_gpu.py -rf > $OUT/tests_decode_linear_hip.txt 2>&1; echo "decode+linear hip_w8a8 rc $?" >> $OUT/rcs.txt ) &
wait
tar czf $OUT/logs.tgz -C $OUT sweep mlp gemm 2>/dev/null
cat $OUT/rcs.txt; tail -n 3 $OUT/tests_new.txt; grep -E "^mlp" $OUT/bench_mlp.txt | cut -c1-300; cat $OUT/exp17b.txt | cut -c1-250
for f in $OUT/tests_decode_linear_*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head -5 | cut -c1-250; tail -n 1 $f; done
