#!/usr/bin/env bash
# forty-second round, run 6: on an H200 the decode benches and their targets (round 37's run1_call.sh, bench mlp now
# with sustained replays); on another card what run 5's 330 s limit cut from the GPU matrix, side by side under
# 500 s each: the triton_fp8 and hip_w8a8 rows without the files that passed whole in run 5 (test_decode_gpu.py,
# test_fast_paths_gpu.py, test_hip_w8a8_gpu.py, and the small-M GEMM file the row runs in parts), and the last 40 / 44
# ids of run 5's small-M parts 0 and 2 (run6_small_m_rest.txt, with the ids before the cut)
SECONDS=0
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round37/run1_call.sh
else
  S=/tmp/run6; mkdir -p $S
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S/device.txt
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > $S/pip.txt 2>&1
  export PYTHONPATH=$PWD:/tmp/site
  G=tests/gpu
  ( timeout 500 python3 ci/run_matrix h200-triton_fp8 --junit $S/triton_fp8.xml --ignore=tests/kernels/test_small_m_gemm.py \
      --ignore=$G/test_decode_gpu.py --ignore=$G/test_fast_paths_gpu.py > $S/triton_fp8.log 2>&1; echo "triton_fp8 rc $?" >> $S/rcs.txt ) &
  ( timeout 500 python3 ci/run_matrix h200-hip_w8a8 --junit $S/hip_w8a8.xml --ignore=$G/test_decode_gpu.py \
      --ignore=$G/test_fast_paths_gpu.py --ignore=$G/test_hip_w8a8_gpu.py > $S/hip_w8a8.log 2>&1; echo "hip_w8a8 rc $?" >> $S/rcs.txt ) &
  ( FUSED_QUANT_BACKEND=triton_fp8 timeout 500 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" \
      @benchmarks/results/round42/run6_small_m_rest.txt > $S/small_m_rest.log 2>&1; echo "small_m rest rc $?" >> $S/rcs.txt ) &
  wait
  tar czf $OUT/run6.tgz -C /tmp run6
  cat $S/device.txt $S/rcs.txt; for f in $S/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head -5; tail -n 1 $f | cut -c1-200; done
fi
echo "done at ${SECONDS} s"
