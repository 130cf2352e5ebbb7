#!/usr/bin/env bash
# thirty-eighth round, run 3: the Triton int8 GEMM's tiles per device kind. The sweep on all four Llama-3-8B linears
# at 512-4096 tokens (what this card's own rows are now "installed"), the int8 per-token MLP with the H200's rows
# against the H100's (run3_int8_rows_ab.py, both forced, bits compared), the GEMM provider tests against float64 on
# both GPU backends (test_linear_gpu.py's int8 ids: every int8 provider, the Triton int8 GEMM at 300 / 2048 / 4100 tokens on this card's rows); one
# archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 100 python3 -m benchmarks.sweep_int8_gemm --ms 512,1024,2048,4096 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
timeout 120 python3 benchmarks/results/round38/run3_int8_rows_ab.py 512,1024,4096 $R/int8_rows_ab.json > $R/int8_rows_ab.txt 2>&1; echo "ab rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 110 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "every_provider and int8" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 100 python3 -m pytest -q -p no:cacheprovider -m hip_w8a8 tests/gpu/test_linear_gpu.py -k "every_provider and int8" > $R/tests_hip_w8a8.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $R/rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt; head -1 $R/int8_sweep.txt | cut -c1-200; grep "sum over shapes" $R/int8_sweep.txt | cut -c1-200
cat $R/int8_rows_ab.txt | cut -c1-200; tail -n 1 $R/tests_triton_fp8.txt $R/tests_hip_w8a8.txt
