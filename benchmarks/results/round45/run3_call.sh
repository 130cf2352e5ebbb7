#!/usr/bin/env bash
# forty-fifth round, run 3 (for a short lease): the GPU tests that run this round's GPU-side change (the fp32
# torch._scaled_mm way's unit scale, one per device; the row-wise way's scale copy per stream) and the decode paths
# around it, on both Triton backends: tests/gpu (decode under graphs and torch.compile, linear, fast paths), the
# small-M file's torch._scaled_mm and fp32-way ids, the selftests; then bench mlp and bench host; files back as
# run3.tgz, written again after each step
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run3.tgz -C /tmp run3; }
GPU_FILES="tests/gpu/test_decode_gpu.py tests/gpu/test_linear_gpu.py tests/gpu/test_fast_paths_gpu.py"
timeout 200 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" \
  $GPU_FILES > $R/gpu_triton_fp8.txt 2>&1; save "tests/gpu triton_fp8 rc $?"
timeout 90 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" \
  tests/kernels/test_small_m_gemm.py -k "scaled_mm or fp32 or row_wise" > $R/small_m_scaled_mm.txt 2>&1
save "small-M scaled_mm ids rc $?"
timeout 150 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m pytest -q -m hip_w8a8 $GPU_FILES > $R/gpu_hip_w8a8.txt 2>&1
save "tests/gpu hip_w8a8 rc $?"
for b in triton_fp8 hip_w8a8; do timeout 60 python3 -m fused_quant selftest --backend $b > $R/selftest_$b.txt 2>&1
  save "selftest $b rc $?"; done
timeout 130 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; save "bench mlp rc $?"
timeout 40 python3 -m fused_quant bench host --out $R/host > $R/bench_host.txt 2>&1; save "bench host rc $?"
cat $R/rcs.txt; tail -qn 1 $R/gpu_*.txt $R/small_m_scaled_mm.txt $R/selftest_*.txt
grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-300
