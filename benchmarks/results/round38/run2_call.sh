#!/usr/bin/env bash
# thirty-eighth round, run 2: where the MLP's GPU time goes on an H200 now (trace_mlp at 1, 16, 64 and 256 tokens),
# bench mlp twice more on the same machine (how far bf16's replay moves between runs), and the Triton int8 GEMM's
# tiles at 1024 and 4096 tokens on gate_up and down (sweep_int8_gemm, with this round's added candidates); one
# archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
timeout 120 python3 -m benchmarks.trace_mlp --m 1,16,64,256 --out $R/trace > $R/trace.txt 2>&1; echo "trace rc $?" >> $R/rcs.txt
for turn in 1 2; do
  timeout 150 python3 -m fused_quant bench mlp --out $R/mlp$turn > $R/bench_mlp$turn.txt 2>&1; echo "bench mlp $turn rc $?" >> $R/rcs.txt
done
timeout 150 python3 -m benchmarks.sweep_int8_gemm --ms 1024,4096 --shapes gate_up,down --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/device.txt $R/rcs.txt
grep "us/call" $R/trace.txt | grep -E "M= +(16|256) " | cut -c1-330
for turn in 1 2; do grep "^mlp M=" $R/bench_mlp$turn.txt | cut -c1-200; done
grep -E "^int8|installed|best" $R/int8_sweep.txt | tail -n 12 | cut -c1-220
