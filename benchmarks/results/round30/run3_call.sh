#!/usr/bin/env bash
# thirtieth round, run 3: bench host's fix (its bf16 layers required grad, so the producers refused its calls in
# run 2) with its new GPU test, then the decode benches on the final tree at every token count (trace_mlp at 1, 16
# and 64 tokens, bench mlp, bench gemm, bench host), and the transformers files with the carried wheels (run 1 had
# none: they skipped); one archive back; a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run3_device.txt
git status --short | head >> $R/run3_device.txt
timeout 120 python3 -m pytest -q tests/gpu/test_decode_gpu.py -k bench_host > $R/run3_test.txt 2>&1; echo "test rc $?" >> $R/run3_rcs.txt
timeout 90 python3 -m benchmarks.trace_mlp --m 1,16,64 --out $R/trace > $R/run3_trace.txt 2>&1; echo "trace rc $?" >> $R/run3_rcs.txt
timeout 150 python3 -m fused_quant bench host --out $R/host > $R/run3_bench_host.txt 2>&1; echo "bench host rc $?" >> $R/run3_rcs.txt
timeout 150 python3 -m fused_quant bench gemm --out $R/gemm > $R/run3_bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $R/run3_rcs.txt
timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run3_rcs.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
PYTHONPATH=$PWD:/tmp/site FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -rs tests/integrations/test_transformers*.py > $R/run3_transformers.txt 2>&1; echo "transformers rc $?" >> $R/run3_rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/run3_device.txt $R/run3_rcs.txt; tail -n 2 $R/run3_test.txt; tail -n 1 $R/run3_transformers.txt; grep "^mlp M=" $R/run3_bench_mlp.txt | cut -c1-330
grep "^host" $R/run3_bench_host.txt | cut -c1-250; grep -E "^gemm" $R/run3_bench_gemm.txt | grep -E "M=  ( 1| 16| 64)" | cut -c1-120
