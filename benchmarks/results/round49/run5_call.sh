#!/usr/bin/env bash
# forty-ninth round, run 5: bench mlp alone (under 150 s) and the decode targets over its file (SQNR against round 31
# run 2's mlp.json), on whichever card comes (named in device.txt)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/device.txt
timeout 150 python3 -m fused_quant bench mlp --out $OUT/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?"
python3 -m benchmarks.report $OUT/mlp/mlp.json --sqnr-baseline benchmarks/results/round31/run2_mlp.json \
  > $OUT/report.txt 2>&1; echo "report rc $?"
grep "^mlp M=" $OUT/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-300
sed -n '/| target/,$p' $OUT/report.txt | cut -c1-230
