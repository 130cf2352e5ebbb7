#!/usr/bin/env bash
# twenty-second round, run 4 (code of c88f720): a second sample of the one launch at 160-256 tokens, then the
# transformers GPU rows with carried wheels (QuantMLP's relu2 through linear_act_quant's two-call record, not
# GPU-run since c88f720) and the decode tests through linear_act_quant on both backends
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
MS=160,192,256,128 timeout 200 python3 benchmarks/results/round22/run3_buckets.py > $OUT/run4_ab.txt 2>&1; echo "ab rc $?" >> $OUT/run4_rcs.txt
mv $OUT/run1_producing_ab.json $OUT/run4_producing_ab.json 2>/dev/null
export PYTHONPATH=$PWD:/tmp/site
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/integrations/test_transformers_gpu.py -k "linear_act_quant or gpu_" -rf > $OUT/run4_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run4_rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 150 python3 -m pytest -q -m "hip_w8a8 or (gpu and not triton_fp8)" tests/gpu/test_decode_gpu.py tests/integrations/test_transformers_gpu.py -k "linear_act_quant or gpu_" -rf > $OUT/run4_tests_hip.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $OUT/run4_rcs.txt
cat $OUT/run4_rcs.txt; tail -n 2 $OUT/run4_tests_triton.txt $OUT/run4_tests_hip.txt; grep -hv "^ *$" $OUT/run4_ab.txt | grep -v Warn | cut -c1-420
