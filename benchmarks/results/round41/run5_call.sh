#!/usr/bin/env bash
# forty-first round, run 5: with the H100's own small-M rows installed (run 4's retime), on an H100: bench gemm and
# bench mlp and their targets, then the whole GPU matrix (round 37's run2_call.sh, .whl carried, each row's limit
# 330 s). On an H200 (which takes the arch's rows) the same, its figures the H200's.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 100 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; echo "bench gemm rc $? at ${SECONDS} s" >> $R/rcs.txt
timeout 120 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $? at ${SECONDS} s" >> $R/rcs.txt
python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json --sqnr-baseline benchmarks/results/round31/run2_mlp.json \
  > $R/report.txt 2>&1; echo "report rc $?" >> $R/rcs.txt
tar czf $OUT/run5.tgz -C /tmp run5
T=330 bash benchmarks/results/round37/run2_call.sh
echo "matrix done at ${SECONDS} s"
cat $R/device.txt $R/rcs.txt; grep "^mlp M=" $R/bench_mlp.txt | cut -c1-200; sed -n '/decode targets/,$p' $R/report.txt | cut -c1-250
grep -A2 "small-M" $OUT/run1_suite_summary.txt /tmp/suite/probe.log 2>/dev/null | head -6
