#!/usr/bin/env bash
# twenty-fourth round, run 5: the decode GPU tests (torch.compile reduce-overhead, graphs, PDL) on both backends and the
# split-K GPU tests, after the partials workspace was kept from one-call callers
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run5_commit.txt 2>/dev/null
( FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py -rf > $OUT/run5_decode_triton.txt 2>&1; echo "decode triton_fp8 rc $?" >> $OUT/run5_rcs.txt ) &
( FUSED_QUANT_BACKEND=hip_w8a8 timeout 200 python3 -m pytest -q -m "hip_w8a8" tests/gpu/test_decode_gpu.py -rf > $OUT/run5_decode_hip.txt 2>&1; echo "decode hip_w8a8 rc $?" >> $OUT/run5_rcs.txt ) &
( FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py -k "split_k or graph_replay or two_streams or partials" -rf > $OUT/run5_split_k.txt 2>&1; echo "split-K tests rc $?" >> $OUT/run5_rcs.txt ) &
wait
cat $OUT/run5_rcs.txt; for f in $OUT/run5_*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head -5 | cut -c1-200; tail -n 1 $f; done
