#!/usr/bin/env bash
# fifty-first round, run 5: the GPU rows this round's value checks reach, where the device time left was too little
# for the whole matrix (round 49's run1_call.sh takes ~350 s): probe, lean import, the selftests, then side by side
# (each job under T seconds, default 200) the triton_fp8 row's markers on tests/gpu, the quantizing_calls bench's
# tests (--own-rows' GPU run), the transformers GPU tests, tests/test_hardening.py and tests/backends; the hip_w8a8
# row's markers on tests/gpu. Logs and rcs.txt under $OUT/run5, a summary last.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=$OUT/run5; mkdir -p $R; : > $R/rcs.txt
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/device.txt
git log -1 --format=%H 2>/dev/null
job() { local name=$1; shift; ( timeout "${T:-200}" "$@" > "$R/$name.log" 2>&1; echo "$name rc $?" >> "$R/rcs.txt" ) & }
LEAN="import torch, sys; import fused_quant; print('cuda initialized:', torch.cuda.is_initialized(), 'triton imported:', 'triton' in sys.modules); sys.exit(torch.cuda.is_initialized() or 'triton' in sys.modules)"
( job probe python3 -m fused_quant probe; wait; job lean-import python3 -c "$LEAN"; wait
  job selftest-triton_fp8 python3 -m fused_quant selftest --backend triton_fp8; wait
  job selftest-hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest; wait ) &
job triton_fp8-gpu env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu tests/test_quantizing_calls_bench.py
job triton_fp8-rest env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/integrations/test_transformers_gpu.py tests/test_hardening.py \
  tests/backends
job hip_w8a8-gpu env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m pytest -q -p no:cacheprovider -m hip_w8a8 tests/gpu
wait
for f in $R/*.log; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -8 | cut -c1-220; tail -n 1 $f | cut -c1-200; done
sort $R/rcs.txt
