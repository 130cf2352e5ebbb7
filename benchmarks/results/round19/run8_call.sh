#!/usr/bin/env bash
# nineteenth round, run 8: the MLP at M = 136 / 160 / 176 (between 128 and 192), then the reworked extreme-scale
# and out-of-range quotient tests on the GPU
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
timeout 150 python3 -m fused_quant bench mlp --quick --m 136,160,176,192 --out $OUT/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py -k "extreme_scales or fast_quotient" --junitxml=$OUT/tests.xml -rf > $OUT/tests.txt 2>&1; echo "tests rc $?" >> $OUT/rcs.txt
sed -i 's/ hostname="[^"]*"//' $OUT/tests.xml
cat $OUT/rcs.txt; grep "^mlp M=" $OUT/bench_mlp.txt | cut -c1-330; tail -n 2 $OUT/tests.txt
