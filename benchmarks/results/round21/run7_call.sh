#!/usr/bin/env bash
# twenty-first round, run 7 (after the two-call record runs the layer's bound call): the GPU tests of
# linear_act_quant and the transformers rows (carried wheels), then bench mlp --quick at the default M set
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py tests/integrations/test_transformers_gpu.py -k "linear_act_quant or gpu_" -rf > $OUT/run7_tests_triton.txt 2>&1; echo "tests triton_fp8 rc $?" >> $OUT/run7_rcs.txt
FUSED_QUANT_BACKEND=hip_w8a8 timeout 150 python3 -m pytest -q -m "hip_w8a8" tests/gpu/test_decode_gpu.py -k "linear_act_quant" -rf > $OUT/run7_tests_hip.txt 2>&1; echo "tests hip_w8a8 rc $?" >> $OUT/run7_rcs.txt
timeout 150 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/run7_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run7_rcs.txt
cp /tmp/mlp/mlp.json $OUT/run7_mlp.json
cat $OUT/run7_rcs.txt; tail -n 1 $OUT/run7_tests_triton.txt $OUT/run7_tests_hip.txt; grep "^mlp M=" $OUT/run7_bench_mlp.txt | cut -c1-330
