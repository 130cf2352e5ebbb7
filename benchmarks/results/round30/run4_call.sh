#!/usr/bin/env bash
# thirtieth round, run 4 (the session's last device minutes): e30ad06's fallback rule on a GPU node, side by side
# under one time limit: the transformers files whole with the node's own selection (run 3 forced triton_fp8 there:
# 19 CPU-model tests failed, the plain-activation fallback) and the triton_fp8 row's producer and linear files
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
( PYTHONPATH=$PWD:/tmp/site timeout ${T:-150} python3 -m pytest -q -rs -p no:cacheprovider tests/integrations/test_transformers*.py > $OUT/run4_transformers.txt 2>&1; echo "transformers rc $?" >> $OUT/run4_rcs.txt ) &
( PYTHONPATH=$PWD FUSED_QUANT_BACKEND=triton_fp8 timeout ${T:-150} python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_producers_gpu.py tests/gpu/test_linear_gpu.py > $OUT/run4_gpu.txt 2>&1; echo "gpu rc $?" >> $OUT/run4_rcs.txt ) &
wait
nvidia-smi --query-gpu=name --format=csv,noheader; cat $OUT/run4_rcs.txt; tail -n 1 $OUT/run4_transformers.txt $OUT/run4_gpu.txt; grep -E "^FAILED" $OUT/run4_*.txt | cut -c1-200
