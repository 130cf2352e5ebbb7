#!/usr/bin/env bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
timeout 150 python3 .scratch/fill18.py > $OUT/fill18.txt 2>&1; echo "fill18 rc $?" >> $OUT/rcs.txt
( FUSED_QUANT_BACKEND=triton_fp8 timeout 300 python3 -m pytest -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py --junitxml=$OUT/decode_triton_fp8.xml -rf > $OUT/decode_triton_fp8.txt 2>&1; echo "decode triton_fp8 rc $?" >> $OUT/rcs.txt ) &
( FUSED_QUANT_BACKEND=hip_w8a8 timeout 300 python3 -m pytest -m hip_w8a8 tests/gpu/test_decode_gpu.py --junitxml=$OUT/decode_hip.xml -rf > $OUT/decode_hip.txt 2>&1; echo "decode hip_w8a8 rc $?" >> $OUT/rcs.txt ) &
wait
cat $OUT/commit.txt $OUT/rcs.txt; grep "^M=" $OUT/fill18.txt | cut -c1-400; tail -n 2 $OUT/decode_*.txt
