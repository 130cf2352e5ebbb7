#!/usr/bin/env bash
# fortieth round, run 2: the int8 GEMM's tiles at 128 and 256 tokens (sweep_int8_gemm with its 64-token tiles and
# the small-M GEMM as a peer), on the four linears; one archive back, the sums per token count last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 400 python3 -m benchmarks.sweep_int8_gemm --ms 128,256 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/device.txt $R/rcs.txt; grep -E "^int8 " $R/int8_sweep.txt | cut -c1-230; grep "sum over shapes" $R/int8_sweep.txt | cut -c1-300
