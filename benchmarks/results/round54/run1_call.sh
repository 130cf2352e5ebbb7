#!/usr/bin/env bash
# fifty-fourth round, run 1: the fifty-third round's run 5 (the selftest's 128 checks on each backend as the matrix
# runs it, the quantizing-calls bench test), none of which has run on a GPU, then run 3's script in the time left
# (on an H100 the FP8 gate_up row at 192 tokens retimed five times with its install rule and bench gemm; on an H200
# the decode benches and decode GPU tests); between them the transformers GPU tests (checkpoint loading, 00de33a),
# .whl carried, and the decode GPU tests (graphs and torch.compile; the layer's name out of the graph, ec0a754)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
git log -1 --format=%H 2>/dev/null
bash benchmarks/results/round53/run5_call.sh
echo "selftests done at ${SECONDS} s"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
PYTHONPATH=$PYTHONPATH:/tmp/site FUSED_QUANT_BACKEND=triton_fp8 timeout 150 python3 -m pytest -q -p no:cacheprovider \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/integrations/test_transformers_gpu.py > /tmp/run5/transformers_gpu.txt 2>&1
echo "transformers GPU tests rc $? at ${SECONDS} s" | tee -a /tmp/run5/rcs.txt; tar czf $OUT/run5.tgz -C /tmp run5
tail -n 2 /tmp/run5/transformers_gpu.txt | cut -c1-200
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:logging -rf \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py > /tmp/run5/decode_gpu.txt 2>&1
echo "decode GPU tests rc $? at ${SECONDS} s" | tee -a /tmp/run5/rcs.txt; tar czf $OUT/run5.tgz -C /tmp run5
tail -n 2 /tmp/run5/decode_gpu.txt | cut -c1-200
timeout $((590 - SECONDS)) bash benchmarks/results/round53/run3_call.sh
echo "run 3's script rc $? at ${SECONDS} s"
