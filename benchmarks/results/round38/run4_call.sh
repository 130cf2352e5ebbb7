#!/usr/bin/env bash
# thirty-eighth round, run 4: the H100's int8 rows with their 257-512 row (128x128x256, from run 3's sweep at 512):
# run 3's MLP A/B at 512 and 1024 tokens and test_linear_gpu's int8 provider ids on both GPU backends again (on an
# H100 the Triton int8 GEMM at 300 tokens takes the new row); one archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
timeout 90 python3 benchmarks/results/round38/run3_int8_rows_ab.py 512,1024 $R/int8_rows_ab.json > $R/int8_rows_ab.txt 2>&1; echo "ab rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 110 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "every_provider and int8" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 60 python3 -m pytest -q -p no:cacheprovider -m hip_w8a8 tests/gpu/test_linear_gpu.py -k "every_provider and int8" > $R/tests_hip_w8a8.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $R/rcs.txt
tar czf $OUT/run4.tgz -C /tmp run4
cat $R/device.txt $R/rcs.txt; cat $R/int8_rows_ab.txt | cut -c1-200; tail -n 1 $R/tests_triton_fp8.txt $R/tests_hip_w8a8.txt
