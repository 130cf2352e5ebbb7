#!/usr/bin/env bash
# fortieth round, run 3: the descriptor int8 GEMM's output stores (run3_int8_store_ab.py: the kernel alone at
# 512-16384 tokens, the int8 MLP at 1024 / 4096), clocks and power sampled every 200 ms; then the int8 GEMM's GPU
# tests on triton_fp8 (every int8 provider against float64, the descriptor kernel against the pointer kernel)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
timeout 330 python3 benchmarks/results/round40/run3_int8_store_ab.py 512,1024,4096,16384 1024,4096 $R/store_ab.json > $R/store_ab.txt 2>&1; echo "store ab rc $?" >> $R/rcs.txt
kill $SMI
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "int8" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt; cut -c1-230 $R/store_ab.txt | grep -v "^{" | tail -n 30
tail -n 3 $R/tests_triton_fp8.txt
awk -F', ' '{n++; if ($5 ~ /4$/) c++} END {print c+0, "of", n, "clock samples with the software power cap active"}' $R/clocks.csv
