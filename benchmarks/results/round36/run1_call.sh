#!/usr/bin/env bash
# thirty-sixth round, run 1 (the last ~270 device seconds, start included): on an H200, bench mlp --quick at 1 and
# 16 tokens (eager and graph columns, every key: the eager int8 per-token target at one token) and one bench host
# turn, each ending with its decode targets table; on another GPU, tests/gpu/test_decode_gpu.py on the triton_fp8
# backend (the bound QuantLinear paths under graphs and compile, on this session's package changes)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run1; mkdir -p $R
git log -1 --format=%H > $R/run1_commit.txt 2>/dev/null; git status --short | head >> $R/run1_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run1_device.txt
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0], 'cuda', torch.version.cuda)" >> $R/run1_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run1_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run1_rcs.txt; tar czf $OUT/run1.tgz -C /tmp run1; }
if grep -q H200 $R/run1_device.txt; then
  step bench_mlp 60 python3 -m fused_quant bench mlp --quick --m 1,16 --out $R/mlp
  step bench_host 30 python3 -m fused_quant bench host --out $R/host
else
  step decode_tests 110 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_decode_gpu.py
fi
cat $R/run1_device.txt $R/run1_rcs.txt; grep -h "^mlp M=" $R/run1_bench_mlp.txt 2>/dev/null | cut -c1-300
grep -h "^host" $R/run1_bench_host.txt 2>/dev/null | cut -c1-250; sed -n '/^| target/,$p' $R/run1_bench_*.txt 2>/dev/null
tail -n 4 $R/run1_decode_tests.txt 2>/dev/null
