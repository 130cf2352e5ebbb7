#!/usr/bin/env bash
# thirty-sixth round, run 1 (device time left: about 650 s, start included): on an H200, bench mlp, three bench host
# turns and bench gemm first (every decode target; benchmarks.report prints the targets table), then the GPU matrix
# side by side in what is left (rows cut at 200 s); on another GPU the matrix first (the package's new input checks
# and bound-call changes; rows cut at 360 s), then bench mlp --quick at 1 and 16 tokens. Outputs in two archives
# written after each step; the short tables last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT R=/tmp/run1; mkdir -p $R
git log -1 --format=%H > $R/run1_commit.txt 2>/dev/null; git status --short | head >> $R/run1_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run1_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run1_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run1_rcs.txt; tar czf $FINAL/run1.tgz -C /tmp run1; }
suite() { local s=$(date +%s); OUT=/tmp/suite T=$1 bash ci/gpu_suite.sh tests-parallel > $R/run1_suite.txt 2>&1
  echo "suite rc $? $(( $(date +%s) - s )) s" >> $R/run1_rcs.txt; tar czf $FINAL/run1_suite.tgz -C /tmp suite
  cp /tmp/suite/summary.txt $R/run1_suite_summary.txt; tar czf $FINAL/run1.tgz -C /tmp run1; }
if grep -q H200 $R/run1_device.txt; then
  step bench_mlp 90 python3 -m fused_quant bench mlp --out $R/mlp
  for i in 1 2 3; do step bench_host$i 40 python3 -m fused_quant bench host --out $R/host$i; done
  step bench_gemm 100 python3 -m fused_quant bench gemm --out $R/gemm
  step targets 30 python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host1/host.json $R/host2/host.json $R/host3/host.json
  suite 200
else
  suite 360
  step bench_mlp_quick 60 python3 -m fused_quant bench mlp --quick --m 1,16 --out $R/mlp_quick
fi
cat $R/run1_device.txt $R/run1_rcs.txt; grep -E "passed|failed|error| rc " $R/run1_suite_summary.txt | cut -c1-120
grep "^mlp M=" $R/run1_bench_mlp*.txt | cut -c1-300; sed -n '/^| target/,$p' $R/run1_targets.txt 2>/dev/null
