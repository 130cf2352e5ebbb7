#!/usr/bin/env bash
# forty-third round, run 1: on an H200 bench mlp (sustained replays from 1024 tokens on), bench gemm, bench host,
# then the decode targets over them (SQNR against round 31 run 2's mlp.json); on another card the chain's picks
# against the rows that card takes (after 897e922's _device_row), the decode GPU tests, then bench gemm (since d15f94d its peers timed in two passes).
# The archive is written again after each step, so that a cut run still returns what it finished.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run1.tgz -C /tmp run1; }
M="triton_fp8 or (gpu and not hip_w8a8)"
FUSED_QUANT_BACKEND=triton_fp8 timeout 100 python3 -m pytest -q -p no:cacheprovider -m "$M" \
  tests/kernels/test_small_m_gemm.py -k chain_picks > $R/chain_picks.txt 2>&1; save "chain_picks rc $?"
if grep -q H200 $R/device.txt; then
  timeout 250 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; save "bench mlp rc $?"
  timeout 200 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; save "bench gemm rc $?"
  timeout 60 python3 -m fused_quant bench host --out $R/host > $R/bench_host.txt 2>&1; save "bench host rc $?"
  python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host/host.json \
    --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1; save "report rc $?"
else
  FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -p no:cacheprovider -m "$M" \
    tests/gpu/test_decode_gpu.py > $R/decode_gpu.txt 2>&1; save "decode gpu rc $?"
  timeout 200 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; save "bench gemm rc $?"
  python3 -m benchmarks.report $R/gemm/gemm.json > $R/report.txt 2>&1; save "report rc $?"
fi
cat $R/rcs.txt; tail -n 1 $R/chain_picks.txt; tail -n 1 $R/decode_gpu.txt 2>/dev/null
grep "^mlp M=" $R/bench_mlp.txt 2>/dev/null | sed 's/SQNR.*//' | cut -c1-330
sed -n '/decode targets/,$p' $R/report.txt | cut -c1-230
