#!/usr/bin/env bash
# thirty-ninth round, run 2: the int8 GEMM past 256 tokens through tensor descriptors, installed. Its GPU tests
# (every int8 provider against float64 on triton_fp8; the descriptor kernel against the pointer kernel, graph
# replays and an unaligned activation on both GPU backends), the int8 per-token MLP before / after
# (run2_int8_mlp_ab.py), bench mlp at 256-16384 tokens, the int8 sweep at 1024 tokens with its new candidates
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "(every_provider and int8) or descriptors" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 60 python3 -m pytest -q -p no:cacheprovider -m hip_w8a8 tests/gpu/test_linear_gpu.py -k "descriptors" > $R/tests_hip_w8a8.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $R/rcs.txt
timeout 100 python3 benchmarks/results/round39/run2_int8_mlp_ab.py 512,1024,4096,16384 $R/int8_mlp_ab.json > $R/int8_mlp_ab.txt 2>&1; echo "mlp ab rc $?" >> $R/rcs.txt
timeout 150 python3 -m fused_quant bench mlp --m 256,1024,4096,16384 --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/rcs.txt
timeout 70 python3 -m benchmarks.sweep_int8_gemm --ms 1024 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/device.txt $R/rcs.txt; tail -n 2 $R/tests_triton_fp8.txt $R/tests_hip_w8a8.txt; grep "^M=" $R/int8_mlp_ab.txt | cut -c1-200
grep "sum over shapes" $R/int8_sweep.txt | cut -c1-240; tail -n 30 $R/bench_mlp.txt | cut -c1-220
