#!/usr/bin/env bash
# thirty-ninth round, run 3: run 2's bench mlp read the int8 per-token MLP at 1024 / 4096 tokens slower than run 2's
# A/B. The GPU's clocks, power and temperature sampled each second throughout; the bench's sequence then the A/B's
# in one process with the int8 GEMM launches listed (run3_int8_mlp_where.py); trace_mlp at 1024 / 4096 tokens (each
# kernel's share); the descriptor tests on both GPU backends (run 2's failed on a problem built without a device
# index, fixed in the test)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -l 1 > $R/clocks.csv 2>&1 &
SMI=$!
timeout 200 python3 benchmarks/results/round39/run3_int8_mlp_where.py 1024,4096 > $R/where.txt 2>&1; echo "where rc $?" >> $R/rcs.txt
timeout 120 python3 -m benchmarks.trace_mlp --m 1024,4096 --calls 4 --out $R/trace > $R/trace.txt 2>&1; echo "trace rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 80 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "descriptors" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 60 python3 -m pytest -q -p no:cacheprovider -m hip_w8a8 tests/gpu/test_linear_gpu.py -k "descriptors" > $R/tests_hip_w8a8.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $R/rcs.txt
kill $SMI
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt; cat $R/where.txt | cut -c1-400; grep -i "int8\|M=" $R/trace.txt | head -30 | cut -c1-160
tail -n 1 $R/tests_triton_fp8.txt $R/tests_hip_w8a8.txt
awk -F', ' 'NR>1{print $2, $4, $5, $6}' $R/clocks.csv | sort | uniq -c | sort -rn | head -12
