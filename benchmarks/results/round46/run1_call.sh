#!/usr/bin/env bash
# forty-sixth round, run 1: bench mlp, bench host, bench gemm and the decode targets over them (SQNR against round 31
# run 2's mlp.json) on whichever card came (named in device.txt), then tests/gpu/test_decode_gpu.py on triton_fp8
# (the revert of the fp32 way's unit scale, da91c9f, under graphs and torch.compile) in the time left; the archive
# written again after each step
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run1.tgz -C /tmp run1; }
timeout 130 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; save "bench mlp rc $?"
timeout 40 python3 -m fused_quant bench host --out $R/host > $R/bench_host.txt 2>&1; save "bench host rc $?"
timeout 170 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; save "bench gemm rc $?"
python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host/host.json \
  --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1; save "report rc $?"
timeout $((585 - SECONDS)) env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:logging -rf \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py > $R/decode_triton_fp8.txt 2>&1
save "decode triton_fp8 rc $?"
cat $R/rcs.txt; tail -qn 3 $R/decode_*.txt | cut -c1-200
grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-330
sed -n '/| target/,$p' $R/report.txt | cut -c1-230
