#!/usr/bin/env bash
# twenty-second round, run 10 (the final code): probe, selftests per backend, and every GEMM provider against
# float64 through QuantLinear on both backends (its M = 16 shape takes the table's new FP8 rows)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run10_commit.txt 2>/dev/null; git status --short | head >> $OUT/run10_commit.txt
timeout 60 python3 -m fused_quant probe > $OUT/run10_probe.txt 2>&1; echo "probe rc $?" >> $OUT/run10_rcs.txt
timeout 60 python3 -m fused_quant selftest --backend triton_fp8 > $OUT/run10_selftest.txt 2>&1; echo "selftest triton_fp8 rc $?" >> $OUT/run10_rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 60 python3 -m fused_quant selftest >> $OUT/run10_selftest.txt 2>&1; echo "selftest hip_w8a8 rc $?" >> $OUT/run10_rcs.txt
timeout 160 python3 -m pytest -q -m "gpu" tests/gpu/test_linear_gpu.py -k "every_provider" -rf > $OUT/run10_tests.txt 2>&1; echo "tests rc $?" >> $OUT/run10_rcs.txt
cat $OUT/run10_rcs.txt; tail -n 2 $OUT/run10_tests.txt; grep -i "passed\|failed" $OUT/run10_selftest.txt | tail -n 4
