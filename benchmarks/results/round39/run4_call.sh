#!/usr/bin/env bash
# thirty-ninth round, run 4: the int8 per-token MLP, round 38's pointer rows against the descriptor rows, under the
# bench's sustained sequence (run4_int8_sustained_ab.py), the GPU's clocks and power sampled every 200 ms; then
# bench mlp at 1024-16384 tokens as the line reads it
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
timeout 200 python3 benchmarks/results/round39/run4_int8_sustained_ab.py 1024,4096,16384 $R/int8_sustained_ab.json > $R/ab.txt 2>&1; echo "ab rc $?" >> $R/rcs.txt
timeout 150 python3 -m fused_quant bench mlp --m 1024,4096,16384 --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/rcs.txt
kill $SMI
tar czf $OUT/run4.tgz -C /tmp run4
cat $R/device.txt $R/rcs.txt $R/ab.txt | cut -c1-300; grep "^mlp M=" $R/bench_mlp.txt | cut -c1-260
echo "clock samples (MHz: count) and the power-cap share:"; awk -F', ' '{print $2}' $R/clocks.csv | sort | uniq -c | sort -rn | head -8
awk -F', ' '{n++; if ($5 ~ /4$/) c++} END {print c+0, "of", n, "samples with the software power cap active"}' $R/clocks.csv
