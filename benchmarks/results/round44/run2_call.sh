#!/usr/bin/env bash
# forty-fourth round, run 2: the whole GPU matrix on this round's package (round 37's run2_call.sh with T=330, .whl
# carried; its files come back as run1_*), then bench gemm again: its FP8 rows of split-K configs, timed after the
# fp32 way of the same problem, now reduce every split (5af05e6); the report over it; files back as run2.tgz
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
T=330 bash benchmarks/results/round37/run2_call.sh
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
timeout 170 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1
echo "bench gemm rc $? at ${SECONDS} s" >> $R/rcs.txt
python3 -m benchmarks.report $R/gemm/gemm.json > $R/report.txt 2>&1; echo "report rc $? at ${SECONDS} s" >> $R/rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/device.txt $R/rcs.txt; sed -n '/| target/,$p' $R/report.txt | cut -c1-200
