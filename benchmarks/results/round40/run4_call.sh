#!/usr/bin/env bash
# fortieth round, run 4: the decode benches and the targets table again (round 37's run1_call.sh) where an H200 comes,
# the descriptor int8 GEMM's first run on that card; then trace_mlp at 16 / 256 / 1024 tokens, the int8 sweep at
# 1024 / 4096 tokens and the int8 GEMM's GPU tests on triton_fp8 (every int8 provider against float64, the
# descriptor kernel against the pointer kernel); one archive back, the targets table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
bash benchmarks/results/round37/run1_call.sh > /tmp/run4_benches.txt 2>&1
R=/tmp/run4; mkdir -p $R; mv /tmp/run1 $R/benches; mv /tmp/run4_benches.txt $R/
echo "benches done at ${SECONDS} s" >> $R/rcs.txt
timeout 90 python3 -m benchmarks.trace_mlp --m 16,256,1024 --calls 4 --out $R/trace > $R/trace.txt 2>&1; echo "trace rc $?" >> $R/rcs.txt
timeout 120 python3 -m benchmarks.sweep_int8_gemm --ms 1024,4096 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $?" >> $R/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_linear_gpu.py -k "int8" > $R/tests_triton_fp8.txt 2>&1; echo "tests triton_fp8 rc $?" >> $R/rcs.txt
echo "all done at ${SECONDS} s" >> $R/rcs.txt
tar czf $OUT/run4.tgz -C /tmp run4
cat $R/benches/device.txt $R/benches/rcs.txt $R/rcs.txt; grep "sum over shapes" $R/int8_sweep.txt | cut -c1-250
grep -E "^M=" $R/trace.txt | cut -c1-250; tail -n 1 $R/tests_triton_fp8.txt
grep "^mlp M=" $R/benches/bench_mlp.txt | cut -c1-250; sed -n '/decode targets/,$p' $R/benches/report.txt | cut -c1-250
