#!/usr/bin/env bash
# forty-fifth round, run 1: bench mlp (sustained replays from 1024 tokens on), bench gemm (two passes), bench host,
# then the decode targets over them (SQNR against round 31 run 2's mlp.json), on whichever card came (named in
# device.txt: an H200's figures answer the targets, an H100's are that card's); the archive written again
# after each step
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%h > $R/commit.txt 2>/dev/null
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run1.tgz -C /tmp run1; }
timeout 150 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; save "bench mlp rc $?"
timeout 170 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; save "bench gemm rc $?"
timeout 40 python3 -m fused_quant bench host --out $R/host > $R/bench_host.txt 2>&1; save "bench host rc $?"
python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host/host.json \
  --sqnr-baseline benchmarks/results/round31/run2_mlp.json > $R/report.txt 2>&1; save "report rc $?"
cat $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-330
sed -n '/| target/,$p' $R/report.txt | cut -c1-230
