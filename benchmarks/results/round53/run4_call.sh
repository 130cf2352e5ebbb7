#!/usr/bin/env bash
# fifty-third round, run 4: the selftest's new checks on the GPU (a0d9007: static sweeps at 0.3 / 0.9, identity and
# fp16 sweeps, the new known answers; 112 checks), each backend as the matrix runs it; the quantizing-calls bench
# test (its arch now from decode.table_arch, 10e72df); then run 3's script (the H100 FP8 gate_up row at 192 tokens
# retimed five times, installed by its rule, and bench gemm; on an H200 the decode benches instead)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
S=/tmp/run4; rm -rf $S; mkdir -p $S
timeout 150 python3 -m fused_quant selftest --backend triton_fp8 > $S/selftest-triton_fp8.txt 2>&1
echo "selftest triton_fp8 rc $? at ${SECONDS} s" | tee -a $S/rcs.txt
timeout 150 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest > $S/selftest-hip_w8a8.txt 2>&1
echo "selftest hip_w8a8 rc $? at ${SECONDS} s" | tee -a $S/rcs.txt
timeout 100 python3 -m fused_quant selftest --backend torch --device cuda > $S/selftest-torch-cuda.txt 2>&1
echo "selftest torch cuda rc $? at ${SECONDS} s" | tee -a $S/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 100 python3 -m pytest -q -p no:cacheprovider \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/test_quantizing_calls_bench.py > $S/quantizing_calls_test.txt 2>&1
echo "quantizing-calls test rc $? at ${SECONDS} s" | tee -a $S/rcs.txt
tar czf $OUT/run4.tgz -C /tmp run4
tail -qn 2 $S/selftest-*.txt $S/quantizing_calls_test.txt | cut -c1-200
grep -h "^FAIL" -A2 $S/selftest-*.txt | head -20 | cut -c1-250
bash benchmarks/results/round53/run3_call.sh
