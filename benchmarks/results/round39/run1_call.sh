#!/usr/bin/env bash
# thirty-ninth round, run 1: the int8 GEMM through tensor descriptors (run1_int8_tma_ab.py) at 512-16384 tokens;
# the int8 GEMM provider tests against float64 (the pointer kernel's epilogue moved into a shared helper); the
# probe's int8 tiles line and the int8 sweep's warm-up at 1024 tokens, neither run on a GPU before. One archive back
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 300 python3 benchmarks/results/round39/run1_int8_tma_ab.py 512,1024,4096,16384 $R/int8_tma_ab.json > $R/int8_tma_ab.txt 2>&1; echo "tma ab rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 110 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "every_provider and int8" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
timeout 40 python3 -m fused_quant probe > $R/probe.txt 2>&1; echo "probe rc $?" >> $R/rcs.txt
timeout 90 python3 -m benchmarks.sweep_int8_gemm --ms 1024 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
tar czf $OUT/run1.tgz -C /tmp run1
cat $R/device.txt $R/rcs.txt; grep -i "int8 GEMM past" $R/probe.txt; grep "sum over shapes" $R/int8_sweep.txt | cut -c1-220
tail -n 1 $R/tests_triton_fp8.txt; grep -v "^  " $R/int8_tma_ab.txt | cut -c1-250 | tail -n 24
