#!/usr/bin/env bash
# forty-fifth round, run 4: after the revert of the fp32 way's unit scale (da91c9f), the decode GPU tests that run
# it under torch.compile and graph capture: tests/gpu/test_decode_gpu.py on triton_fp8, then its compiled ids on
# hip_w8a8; files back as run4.tgz
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run4.tgz -C /tmp run4; }
timeout 220 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:logging -rf \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py > $R/decode_triton_fp8.txt 2>&1
save "decode triton_fp8 rc $?"
timeout 70 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m pytest -q -p no:logging -rf -m hip_w8a8 -k compiled \
  tests/gpu/test_decode_gpu.py > $R/decode_hip_w8a8.txt 2>&1
save "decode hip_w8a8 compiled rc $?"
cat $R/rcs.txt; tail -qn 3 $R/decode_*.txt | cut -c1-200
