#!/usr/bin/env bash
# thirty-ninth round, run 5: bench mlp at every token count with the graph replays in rotated turns
# (decode.graph_turns), clocks and power sampled every 200 ms; then the GPU linear tests on triton_fp8 (every
# provider against float64, the descriptor kernel, the MLP under compile and graph replay)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
timeout 330 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/rcs.txt
kill $SMI
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
tar czf $OUT/run5.tgz -C /tmp run5
cat $R/device.txt $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | cut -c1-280; sed -n '/decode targets/,$p' $R/bench_mlp.txt | head -16
tail -n 1 $R/tests_triton_fp8.txt
awk -F', ' '{n++; if ($5 ~ /4$/) c++} END {print c+0, "of", n, "clock samples with the software power cap active"}' $R/clocks.csv
