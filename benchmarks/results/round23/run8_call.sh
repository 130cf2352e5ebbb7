#!/usr/bin/env bash
# twenty-third round, run 8 (final code: the driver launch's argument count check and lock): the two launches taking
# turns again, the host profile (its primitive mended), then the decode and fast-path GPU tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
timeout 100 python3 benchmarks/results/round23/run2_driver_interleaved.py $OUT/run8_driver_interleaved.json > $OUT/run8_driver_interleaved.txt 2>&1; echo "interleaved rc $?" >> $OUT/run8_rcs.txt
timeout 60 python3 benchmarks/profile_host.py --top 14 --calls 300 > $OUT/run8_profile_host.txt 2>&1; echo "profile_host rc $?" >> $OUT/run8_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/gpu/test_fast_paths_gpu.py -rf > $OUT/run8_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run8_rcs.txt
cat $OUT/run8_rcs.txt; sed -n '1,7p' $OUT/run8_driver_interleaved.txt; grep -E "^primitive" $OUT/run8_profile_host.txt; grep -E "^===" $OUT/run8_profile_host.txt | head -30; tail -n 2 $OUT/run8_tests_triton.txt
