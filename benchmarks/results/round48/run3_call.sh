#!/usr/bin/env bash
# forty-eighth round, run 3 (for the last ~300 s of device time): on whichever card comes, the lean import, the
# triton_fp8 selftest and tests/gpu/test_decode_gpu.py on triton_fp8 (bitwise graphs and torch.compile of every key,
# which this package's new autograd rule of the quant_gemm custom op reaches), each under T seconds
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
git log -1 --format=%H 2>/dev/null >> $OUT/device.txt
LEAN="import torch, sys; import fused_quant; print('cuda initialized', torch.cuda.is_initialized(), 'triton imported', 'triton' in sys.modules); sys.exit(torch.cuda.is_initialized() or 'triton' in sys.modules)"
python3 -c "$LEAN" > $OUT/lean-import.log 2>&1; echo "lean-import rc $?" >> $OUT/rcs.txt
( timeout "${T:-150}" python3 -m fused_quant selftest --backend triton_fp8 > $OUT/selftest-triton_fp8.log 2>&1
  echo "selftest-triton_fp8 rc $?" >> $OUT/rcs.txt ) &
( timeout "${T:-150}" env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:logging -rf \
    -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py > $OUT/decode_triton_fp8.log 2>&1
  echo "decode-triton_fp8 rc $?" >> $OUT/rcs.txt ) &
wait
for f in $OUT/*.log; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -6 | cut -c1-220; tail -n 1 $f | cut -c1-160; done
sort $OUT/rcs.txt
