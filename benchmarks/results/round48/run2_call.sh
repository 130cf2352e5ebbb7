#!/usr/bin/env bash
# forty-eighth round, run 2 (for what device time is left, ~600 s): on whichever card comes, the GPU rows this
# round's package changes could reach, side by side under one limit (T, default 330 s), logs straight into $OUT:
# probe, lean import, the three selftests; the triton_fp8 row and the hip_w8a8 row without the small-M kernel file
# (no kernel changed: it ran in full in round 47, 4 x 140 passed); the transformers GPU rows come with .whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SMALL_M=tests/kernels/test_small_m_gemm.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/device.txt
git log -1 --format=%H 2>/dev/null >> $OUT/device.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PYTHONPATH:/tmp/site
job() { local name=$1; shift; ( timeout "${T:-330}" "$@" > "$OUT/$name.log" 2>&1; echo "$name rc $?" >> "$OUT/rcs.txt" ) & }
LEAN="import torch, sys; import fused_quant; print('cuda initialized', torch.cuda.is_initialized(), 'triton imported', 'triton' in sys.modules); sys.exit(torch.cuda.is_initialized() or 'triton' in sys.modules)"
( job probe python3 -m fused_quant probe; wait; job lean-import python3 -c "$LEAN"; wait
  job selftest-triton_fp8 python3 -m fused_quant selftest --backend triton_fp8; wait
  job selftest-hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest; wait
  job selftest-torch-cuda python3 -m fused_quant selftest --backend torch --device cuda; wait ) &
job pytest-triton_fp8 python3 ci/run_matrix h200-triton_fp8 --ignore="$SMALL_M"
job pytest-hip_w8a8 python3 ci/run_matrix h200-hip_w8a8 --ignore="$SMALL_M"
job pytest-torch python3 ci/run_matrix h200-torch
wait
for f in $OUT/*.log; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -6 | cut -c1-220; tail -n 1 $f | cut -c1-160; done
sort $OUT/rcs.txt
