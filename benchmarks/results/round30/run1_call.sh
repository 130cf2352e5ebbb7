#!/usr/bin/env bash
# thirtieth round, run 1 (planned, not run yet): the whole GPU matrix on the final tree in one device call: probe,
# lean import, the three selftests, the triton_fp8 row without test_small_m_gemm.py, that file's GPU ids in four
# parts (round 29's id lists: the file is unchanged since), the torch and hip_w8a8 rows, side by side
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT OUT=/tmp/suite T=${T:-450}
IDS=benchmarks/results/round29
mkdir -p $OUT
git log -1 --format=%H > $FINAL/run1_commit.txt 2>/dev/null; git status --short | head >> $FINAL/run1_commit.txt
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/device.txt
( python3 -m fused_quant probe > $OUT/probe.txt 2>&1; echo "probe rc $?" >> $OUT/rcs.txt
  python3 -c "import torch, sys, time; t=time.perf_counter(); import fused_quant; dt=time.perf_counter()-t; print(f'import fused_quant {dt*1e3:.1f} ms; cuda initialized: {torch.cuda.is_initialized()}; triton imported: {\"triton\" in sys.modules}'); sys.exit(torch.cuda.is_initialized() or 'triton' in sys.modules)" > $OUT/lean.txt 2>&1; echo "lean-import rc $?" >> $OUT/rcs.txt
  timeout $T python3 -m fused_quant selftest --backend triton_fp8 > $OUT/selftest_triton_fp8.txt 2>&1; echo "selftest triton_fp8 rc $?" >> $OUT/rcs.txt
  FUSED_QUANT_BACKEND=hip_w8a8 timeout $T python3 -m fused_quant selftest > $OUT/selftest_hip.txt 2>&1; echo "selftest hip_w8a8 rc $?" >> $OUT/rcs.txt
  timeout $T python3 -m fused_quant selftest --backend torch --device cuda > $OUT/selftest_torch.txt 2>&1; echo "selftest torch-cuda rc $?" >> $OUT/rcs.txt
) &
( timeout $T python3 ci/run_matrix h200-triton_fp8 --junit $OUT/h200-triton_fp8-a.xml --ignore=tests/kernels/test_small_m_gemm.py -rf > $OUT/row_triton_fp8_a.txt 2>&1; echo "h200-triton_fp8 (all but test_small_m_gemm) rc $?" >> $OUT/rcs.txt ) &
for h in 1 2 3 4; do
( FUSED_QUANT_BACKEND=triton_fp8 timeout $T python3 -m pytest -m "triton_fp8 or (gpu and not hip_w8a8)" @$IDS/run1_b_part${h}_ids.txt --junitxml=$OUT/h200-triton_fp8-b$h.xml -rf > $OUT/row_triton_fp8_b$h.txt 2>&1; echo "h200-triton_fp8 (test_small_m_gemm, part $h) rc $?" >> $OUT/rcs.txt ) &
done
( timeout $T python3 ci/run_matrix h200-torch --junit $OUT/h200-torch.xml -rf > $OUT/row_torch.txt 2>&1; echo "h200-torch rc $?" >> $OUT/rcs.txt ) &
( timeout $T python3 ci/run_matrix h200-hip_w8a8 --junit $OUT/h200-hip_w8a8.xml -rf > $OUT/row_hip.txt 2>&1; echo "h200-hip_w8a8 rc $?" >> $OUT/rcs.txt ) &
wait
tar czf $FINAL/run1_suite.tgz -C /tmp suite
{ cat $OUT/device.txt $OUT/lean.txt; grep -h "checks passed" $OUT/selftest_*.txt
  for f in $OUT/row_*.txt; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -8 | cut -c1-250; tail -n 1 $f | cut -c1-200; done
  cat $OUT/rcs.txt; } > $FINAL/run1_suite_summary.txt
cat $FINAL/run1_suite_summary.txt
