#!/usr/bin/env bash
# thirty-second round, run 3: KernelCall.fits (a quantizing call's kernel checked against a block's shared memory
# when it is bound) on the GPU. Side by side: what failed in run 1 (test_transformers_gpu.py, both backends) with
# test_decode_gpu.py, and test_small_m_gemm.py's quantizing / producing / fits GPU ids in two parts; then, alone on
# the GPU, run2_call.sh (quantizing_config's bits test, the A/B, bench mlp --quick). One archive back, a table last.
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 PYTHONPATH=$PWD
R=/tmp/run3; mkdir -p $R; : > $R/rcs.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=$PYTHONPATH:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run3_device.txt
git status --short | head >> $R/run3_device.txt
job() { local name=$1; shift; ( timeout 330 "$@" > $R/$name.log 2>&1; echo "$name rc $?" >> $R/rcs.txt ) & }
FAST="triton_fp8 or (gpu and not hip_w8a8)"  # the h200-triton_fp8 row's markers (ci/matrix.json)
job triton_fp8 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider -m "$FAST" \
  tests/integrations/test_transformers_gpu.py tests/gpu/test_decode_gpu.py
job hip_w8a8 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m pytest -q -p no:cacheprovider -m hip_w8a8 \
  tests/integrations/test_transformers_gpu.py tests/gpu/test_decode_gpu.py
FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider --collect-only -m "$FAST" \
  -k "quantiz or producing or fits" tests/kernels/test_small_m_gemm.py 2>/dev/null | grep '::' > $R/small_m_ids.txt
split -n r/2 -d $R/small_m_ids.txt $R/small_m_ids_part
for part in $R/small_m_ids_part0?; do
  job small_m-${part: -1} env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider -m "$FAST" "@$part"
done
wait
OUT=$R bash benchmarks/results/round32/run2_call.sh > $R/run2_call.txt 2>&1
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/run3_device.txt; wc -l < $R/small_m_ids.txt; sort $R/rcs.txt
for f in $R/*.log; do echo "== $(basename $f)"; grep -E "^(FAILED|ERROR)" $f | head -5 | cut -c1-200; tail -n 1 $f; done
cat $R/run2_call.txt | cut -c1-330
