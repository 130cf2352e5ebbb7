#!/usr/bin/env bash
# twenty-ninth round, run 3: on the table with int8 gate_up's one-token row (FP8 gate_up back on its MMA row, the lanes
# summed in fp32 again after run 2): bench mlp --quick, bench gemm at M = 1 and 16, test_decode_gpu.py on both
# backends (side by side, after the benchmarks), then bench host --quick
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
timeout 200 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run3_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run3_mlp.json 2>/dev/null
timeout 100 python3 -m fused_quant bench gemm --m 1,16 --out /tmp/gemm > $OUT/run3_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/run3_rcs.txt
cp /tmp/gemm/gemm.json $OUT/run3_gemm.json 2>/dev/null
( FUSED_QUANT_BACKEND=triton_fp8 timeout 110 python3 -m pytest -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py -rf > $OUT/run3_decode_triton_fp8.txt 2>&1; echo "decode triton_fp8 rc $?" >> $OUT/run3_rcs.txt ) &
( FUSED_QUANT_BACKEND=hip_w8a8 timeout 110 python3 -m pytest -m "hip_w8a8" tests/gpu/test_decode_gpu.py -rf > $OUT/run3_decode_hip.txt 2>&1; echo "decode hip_w8a8 rc $?" >> $OUT/run3_rcs.txt ) &
wait
timeout 80 python3 -m fused_quant bench host --quick --out /tmp/host > $OUT/run3_bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/run3_rcs.txt
cp /tmp/host/host.json $OUT/run3_host.json 2>/dev/null
cat $OUT/run3_rcs.txt; grep "^mlp M=" $OUT/run3_bench_mlp.txt | cut -c1-330; grep -E "^gemm" $OUT/run3_bench_gemm.txt | cut -c1-220
tail -n 1 $OUT/run3_decode_*.txt; tail -n 25 $OUT/run3_bench_host.txt | cut -c1-200
