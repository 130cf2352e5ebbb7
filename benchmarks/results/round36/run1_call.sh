#!/usr/bin/env bash
# thirty-sixth round, run 1 (device time left: about 450 s, start included): on an H200, bench mlp, three bench host
# turns and bench gemm first (every decode target; benchmarks.report prints the targets table), then the GPU rows
# side by side in what is left (cut at 100 s); on another GPU the GPU rows (the package's new input checks and
# bound-call changes; cut at 250 s). The rows: probe, lean import, the three selftests, the
# triton_fp8 row without test_small_m_gemm.py (its kernels did not change; its GPU ids take four parts), the torch
# and hip_w8a8 rows, side by side, each cut at $T s. Outputs in two archives written after each step; tables last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT R=/tmp/run1 S=/tmp/suite; mkdir -p $R $S
git log -1 --format=%H > $R/run1_commit.txt 2>/dev/null; git status --short | head >> $R/run1_commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run1_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run1_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run1_rcs.txt; tar czf $FINAL/run1.tgz -C /tmp run1; }
job() { local name=$1; shift; ( timeout "$T" "$@" > "$S/$name.log" 2>&1; echo "$name rc $?" >> "$S/rcs.txt" ) & }
rows() { T=$1; local s=$(date +%s)
  if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site; fi
  ( job probe python3 -m fused_quant probe; wait; job selftest-triton_fp8 python3 -m fused_quant selftest --backend triton_fp8; wait
    job selftest-hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest; wait
    job selftest-torch-cuda python3 -m fused_quant selftest --backend torch --device cuda; wait ) &
  job lean-import python3 -c "import torch, sys; import fused_quant; sys.exit(torch.cuda.is_initialized() or 'triton' in sys.modules)"
  job pytest-triton_fp8 python3 ci/run_matrix h200-triton_fp8 --ignore=tests/kernels/test_small_m_gemm.py
  job pytest-torch python3 ci/run_matrix h200-torch
  job pytest-hip_w8a8 python3 ci/run_matrix h200-hip_w8a8
  wait; echo "rows $(( $(date +%s) - s )) s" >> $R/run1_rcs.txt
  for f in $S/*.log; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -8 | cut -c1-250; tail -n 1 $f | cut -c1-200; done > $R/run1_rows_summary.txt
  sort $S/rcs.txt >> $R/run1_rows_summary.txt; tar czf $FINAL/run1_rows.tgz -C /tmp suite; tar czf $FINAL/run1.tgz -C /tmp run1; }
if grep -q H200 $R/run1_device.txt; then
  step bench_mlp 90 python3 -m fused_quant bench mlp --out $R/mlp
  for i in 1 2 3; do step bench_host$i 40 python3 -m fused_quant bench host --out $R/host$i; done
  step bench_gemm 100 python3 -m fused_quant bench gemm --out $R/gemm
  step targets 30 python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json $R/host1/host.json $R/host2/host.json $R/host3/host.json
  rows 100
else
  rows 250
fi
cat $R/run1_device.txt $R/run1_rcs.txt; cat $R/run1_rows_summary.txt
grep "^mlp M=" $R/run1_bench_mlp*.txt | cut -c1-300; sed -n '/^| target/,$p' $R/run1_targets.txt 2>/dev/null
