#!/usr/bin/env bash
# forty-fourth round, run 3 (two GPUs of one host): tests/gpu/test_two_gpus.py on both Triton backends (layers on
# cuda:1 called while cuda:0 is current), then the GEMM tests of this round's fixes; logs back as run3.tgz
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
SECONDS=0
R=/tmp/run3; mkdir -p $R
nvidia-smi -L > $R/device.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'gpus', torch.cuda.device_count())" >> $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run3.tgz -C /tmp run3; }
for b in triton_fp8 hip_w8a8; do
  FUSED_QUANT_BACKEND=$b timeout 200 python3 -m pytest -q -p no:cacheprovider -m $b tests/gpu/test_two_gpus.py \
    > $R/two_gpus_$b.txt 2>&1; save "two_gpus $b rc $?"
done
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_small_m_gemm.py \
  -k "after_the_fp32 or strided_scales or scaled_mm_ways" > $R/gemm_fixes.txt 2>&1; save "gemm fixes rc $?"
cat $R/rcs.txt; tail -n 3 $R/*.txt | cut -c1-200
