#!/usr/bin/env bash
# fortieth round, run 5: the int8 MLP's int8 GEMM with and without programmatic dependent launch in the bench's
# sequence (run5_int8_pdl_ab.py at 1024 / 4096 / 16384 tokens), clocks and power sampled every 200 ms
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $R/clocks.csv 2>&1 &
SMI=$!
timeout 200 python3 benchmarks/results/round40/run5_int8_pdl_ab.py 1024,4096,16384 $R/pdl_ab.json > $R/pdl_ab.txt 2>&1; echo "pdl ab rc $?" >> $R/rcs.txt
kill $SMI
tar czf $OUT/run5.tgz -C /tmp run5
cat $R/device.txt $R/rcs.txt; grep -v "^{" $R/pdl_ab.txt | cut -c1-260 | tail -n 12
awk -F', ' '{n++; if ($5 ~ /4$/) c++} END {print c+0, "of", n, "clock samples with the software power cap active"}' $R/clocks.csv
