#!/usr/bin/env bash
# thirty-eighth round, run 3: run 2's trace and two bench mlp runs again on whatever card the call gets (an H200 would
# give that card's kernel shares for the current package and a second and third sample of its bf16 replay); one
# archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
timeout 120 python3 -m benchmarks.trace_mlp --m 1,16,64,256 --out $R/trace > $R/trace.txt 2>&1; echo "trace rc $?" >> $R/rcs.txt
for turn in 1 2; do
  timeout 150 python3 -m fused_quant bench mlp --out $R/mlp$turn > $R/bench_mlp$turn.txt 2>&1; echo "bench mlp $turn rc $?" >> $R/rcs.txt
done
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/device.txt $R/rcs.txt
grep "us/call" $R/trace.txt | grep -E "M= +(16|256) " | cut -c1-330
for turn in 1 2; do grep "^mlp M=" $R/bench_mlp$turn.txt | cut -c1-200; done
