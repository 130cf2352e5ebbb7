#!/usr/bin/env bash
# twenty-second round, run 8 (the table with run 7's FP8 qkv / o rows): the small-M GPU tests of the chain and
# table, the QuantLinear GPU tests, then bench gemm --quick at M = 8 and 16
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run8_commit.txt 2>/dev/null; git status --short | head >> $OUT/run8_commit.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py tests/gpu/test_linear_gpu.py -k "chain or table or linear" -rf > $OUT/run8_tests.txt 2>&1; echo "tests rc $?" >> $OUT/run8_rcs.txt
timeout 120 python3 -m fused_quant bench gemm --quick --m 8,16 --out /tmp/gemm > $OUT/run8_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run8_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run8_gemm.json 2>/dev/null
cat $OUT/run8_rcs.txt; tail -n 2 $OUT/run8_tests.txt; grep "^gemm" $OUT/run8_bench_gemm.txt | cut -c1-230
