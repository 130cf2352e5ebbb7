#!/usr/bin/env bash
# The GPU matrix in one call (H200): probe, lean import, selftest per backend, GPU test rows
# for triton_fp8, torch and hip_w8a8 (forced), then the benchmarks (into $OUT/bench). Logs under $OUT (or ./out).
# Usage: bash ci/gpu_suite.sh [tests|tests-1|tests-2|bench|all] [--quick]
# tests-1 and tests-2 split the tests in two (probe, lean import, selftests and the triton_fp8 row; the
# torch and hip_w8a8 rows) for machines that cap one command's run below the whole suite's ~10 minutes.
set -u -o pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
what=${1:-all}; quick=${2:-}
case "$what" in tests|tests-1|tests-2|bench|all) ;; *) echo "unknown part '$what': tests, tests-1, tests-2, bench or all" >&2; exit 2;; esac
if [ -d .whl ]; then  # carried wheels (ci/gpu_wheels.sh): the transformers rows' packages
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
status=0
step() { echo "=== $1"; shift; "$@" 2>&1 | tee -a "$OUT/gpu_suite.log"; local rc=${PIPESTATUS[0]}; echo "=== rc=$rc"; [ "$rc" = 0 ] || status=1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/device.txt"
part1=no; part2=no
case "$what" in tests|all) part1=yes; part2=yes;; tests-1) part1=yes;; tests-2) part2=yes;; esac
if [ "$part1" = yes ]; then
  step probe python3 -m fused_quant probe
  step lean-import python3 -c "import torch, sys, time; t=time.perf_counter(); import fused_quant; dt=time.perf_counter()-t; print(f'import fused_quant {dt*1e3:.1f} ms; cuda initialized: {torch.cuda.is_initialized()}; triton imported: {\"triton\" in sys.modules}'); sys.exit(torch.cuda.is_initialized())"
  step selftest-triton_fp8 python3 -m fused_quant selftest --backend triton_fp8
  step selftest-hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest
  step selftest-torch-cuda python3 -m fused_quant selftest --backend torch --device cuda
  step pytest-h200-triton_fp8 python3 ci/run_matrix h200-triton_fp8 --junit "$OUT/h200-triton_fp8.xml"
fi
if [ "$part2" = yes ]; then
  step pytest-h200-torch python3 ci/run_matrix h200-torch --junit "$OUT/h200-torch.xml"
  step pytest-h200-hip_w8a8 python3 ci/run_matrix h200-hip_w8a8 --junit "$OUT/h200-hip_w8a8.xml"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # its own folder: bench refuses a non-empty --out (this script's logs are in $OUT)
  step bench python3 -m fused_quant bench all --out "$OUT/bench" $quick
fi
exit $status
