#!/usr/bin/env bash
# twenty-third round, run 1: the driver launch against Triton's launcher (host A/B, bits), then the GPU tests
# that launch bound eager calls (decode tests, fast paths) with the driver launch on
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run1_commit.txt 2>/dev/null; git status --short | head >> $OUT/run1_commit.txt
timeout 200 python3 benchmarks/results/round23/run1_driver_ab.py $OUT/run1_driver_ab.json > $OUT/run1_driver_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run1_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 220 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/gpu/test_fast_paths_gpu.py -rf -x > $OUT/run1_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run1_rcs.txt
cat $OUT/run1_rcs.txt; grep -E "bits equal|built|declined|primitive|DriverLaunch" $OUT/run1_driver_ab.txt | cut -c1-600; sed -n '/host us per call/,$p' $OUT/run1_driver_ab.txt; tail -n 3 $OUT/run1_tests_triton.txt
