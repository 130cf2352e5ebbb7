#!/usr/bin/env bash
# The GPU matrix in one call (H200): probe, lean import, selftest per backend, GPU test rows
# for triton_fp8, torch and hip_w8a8 (forced), then the benchmarks (into $OUT/bench). Logs under $OUT (or ./out).
# Usage: bash ci/gpu_suite.sh [tests|tests-1|tests-2|tests-parallel|bench|all] [--quick]
# tests-1 and tests-2 split the tests in two (probe, lean import, selftests and the triton_fp8 row; the
# torch and hip_w8a8 rows) for machines that cap one command's run below the whole suite's ~10 minutes.
# tests-parallel runs all of them side by side, each under `timeout $T` (default 450 s), the triton_fp8 row's
# tests/kernels/test_small_m_gemm.py in four parts of its collected GPU ids: one log per job, $OUT/rcs.txt, and
# $OUT/summary.txt (failures and each job's last line).
set -u -o pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
what=${1:-all}; quick=${2:-}
case "$what" in tests|tests-1|tests-2|tests-parallel|bench|all) ;;
  *) echo "unknown part '$what': tests, tests-1, tests-2, tests-parallel, bench or all" >&2; exit 2;; esac
if ! python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  echo "gpu_suite: needs a GPU (torch.cuda.is_available() is False); its rows would all skip" >&2; exit 2
fi
if [ -d .whl ]; then  # wheels downloaded beforehand (ci/gpu_wheels.sh): the transformers rows' packages
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
status=0
step() { echo "=== $1"; shift; "$@" 2>&1 | tee -a "$OUT/gpu_suite.log"; local rc=${PIPESTATUS[0]}; echo "=== rc=$rc"; [ "$rc" = 0 ] || status=1; }
# one job of tests-parallel: its own log, its exit status in rcs.txt
job() { local name=$1; shift; ( timeout "${T:-450}" "$@" > "$OUT/$name.log" 2>&1; echo "$name rc $?" >> "$OUT/rcs.txt" ) & }
# importing fused_quant initializes no CUDA and imports no Triton
LEAN_IMPORT="import torch, sys, time; t=time.perf_counter(); import fused_quant; dt=time.perf_counter()-t; print(f'import fused_quant {dt*1e3:.1f} ms; cuda initialized: {torch.cuda.is_initialized()}; triton imported: {\"triton\" in sys.modules}'); sys.exit(torch.cuda.is_initialized() or 'triton' in sys.modules)"
SMALL_M=tests/kernels/test_small_m_gemm.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/device.txt"
part1=no; part2=no
case "$what" in tests|all) part1=yes; part2=yes;; tests-1) part1=yes;; tests-2) part2=yes;; esac
if [ "$part1" = yes ]; then
  step probe python3 -m fused_quant probe
  step lean-import python3 -c "$LEAN_IMPORT"
  step selftest-triton_fp8 python3 -m fused_quant selftest --backend triton_fp8
  step selftest-hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest
  step selftest-torch-cuda python3 -m fused_quant selftest --backend torch --device cuda
  step pytest-h200-triton_fp8 python3 ci/run_matrix h200-triton_fp8 --junit "$OUT/h200-triton_fp8.xml"
fi
if [ "$part2" = yes ]; then
  step pytest-h200-torch python3 ci/run_matrix h200-torch --junit "$OUT/h200-torch.xml"
  step pytest-h200-hip_w8a8 python3 ci/run_matrix h200-hip_w8a8 --junit "$OUT/h200-hip_w8a8.xml"
fi
if [ "$what" = tests-parallel ]; then
  : > "$OUT/rcs.txt"
  fast="triton_fp8 or (gpu and not hip_w8a8)"  # the h200-triton_fp8 row's markers (ci/matrix.json)
  python3 -m pytest -q --collect-only -m "$fast" "$SMALL_M" 2>/dev/null | grep '::' > "$OUT/small_m_ids.txt"
  split -n r/4 -d "$OUT/small_m_ids.txt" "$OUT/small_m_ids_part"  # round-robin: four parts of like length
  ( job probe python3 -m fused_quant probe; wait
    job lean-import python3 -c "$LEAN_IMPORT"; wait
    job selftest-triton_fp8 python3 -m fused_quant selftest --backend triton_fp8; wait
    job selftest-hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest; wait
    job selftest-torch-cuda python3 -m fused_quant selftest --backend torch --device cuda; wait ) &
  job pytest-h200-triton_fp8 python3 ci/run_matrix h200-triton_fp8 --junit "$OUT/h200-triton_fp8.xml" --ignore="$SMALL_M"
  for part in "$OUT"/small_m_ids_part0?; do
    job "pytest-h200-triton_fp8-small_m-${part: -1}" env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -m "$fast" \
      "@$part" --junitxml="$part.xml"
  done
  job pytest-h200-torch python3 ci/run_matrix h200-torch --junit "$OUT/h200-torch.xml"
  job pytest-h200-hip_w8a8 python3 ci/run_matrix h200-hip_w8a8 --junit "$OUT/h200-hip_w8a8.xml"
  wait
  { cat "$OUT/device.txt"
    for f in "$OUT"/*.log; do echo "== $(basename "$f")"; grep -E "^(FAILED|ERROR)" "$f" | head -8 | cut -c1-250
      tail -n 1 "$f" | cut -c1-200; done
    sort "$OUT/rcs.txt"; } > "$OUT/summary.txt"
  cat "$OUT/summary.txt"
  grep -qv " rc 0$" "$OUT/rcs.txt" && status=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # its own folder: bench refuses a non-empty --out (this script's logs are in $OUT)
  step bench python3 -m fused_quant bench all --out "$OUT/bench" $quick
fi
exit $status
