#!/usr/bin/env bash
# fifty-third round, run 5 (run 4 was taken back mid-call; 373 s of device time left): the selftest's new
# checks on the GPU (a0d9007: static sweeps at 0.3 / 0.9, identity and fp16 sweeps, the new known answers;
# edc940d: GEMMs through the checked entry against float64; 128 checks), each backend as the matrix runs it; the
# quantizing-calls bench test (its arch now from decode.table_arch, 10e72df); not run 3's retime (too little device time)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
S=/tmp/run5; rm -rf $S; mkdir -p $S
save() { echo "$1 at ${SECONDS} s" | tee -a $S/rcs.txt; tar czf $OUT/run5.tgz -C /tmp run5; }
timeout 150 python3 -m fused_quant selftest --backend triton_fp8 > $S/selftest-triton_fp8.txt 2>&1
save "selftest triton_fp8 rc $?"
timeout 150 env FUSED_QUANT_BACKEND=hip_w8a8 python3 -m fused_quant selftest > $S/selftest-hip_w8a8.txt 2>&1
save "selftest hip_w8a8 rc $?"
timeout 100 python3 -m fused_quant selftest --backend torch --device cuda > $S/selftest-torch-cuda.txt 2>&1
save "selftest torch cuda rc $?"
FUSED_QUANT_BACKEND=triton_fp8 timeout 100 python3 -m pytest -q -p no:cacheprovider \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/test_quantizing_calls_bench.py > $S/quantizing_calls_test.txt 2>&1
save "quantizing-calls test rc $?"
tail -qn 2 $S/selftest-*.txt $S/quantizing_calls_test.txt | cut -c1-200
grep -h "^FAIL" -A2 $S/selftest-*.txt | head -20 | cut -c1-250
