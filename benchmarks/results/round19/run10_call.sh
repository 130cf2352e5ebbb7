#!/usr/bin/env bash
# nineteenth round, run 10: the new token buckets 160 and 192 retimed with the 256 bucket's configs beside the torch
# providers and installed on this copy; then the MLP and the GEMMs at M between 128 and 256, and the table's GPU tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
cp fused_quant/kernels/small_m_gemm_configs.json $OUT/table_before.json
timeout 100 python3 -m benchmarks.sweep_small_m_gemm --out $OUT/sweep --retime --seed-from 256 --ms 160,192 --install > $OUT/retime.txt 2>&1; echo "retime rc $?" >> $OUT/rcs.txt
cp fused_quant/kernels/small_m_gemm_configs.json $OUT/table_after.json
timeout 75 python3 -m fused_quant bench mlp --quick --m 136,160,176,192,224,256 --out $OUT/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/rcs.txt
timeout 30 python3 -m fused_quant bench gemm --quick --m 136,160,192 --out $OUT/gemm > $OUT/bench_gemm.txt 2>&1; echo "bench gemm rc $?" >> $OUT/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 40 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py -k "chain_picks or table or bucket or retime" -rf > $OUT/tests.txt 2>&1; echo "tests rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep -E "^(fp8|int8)" $OUT/retime.txt | cut -c1-200; grep "^mlp M=" $OUT/bench_mlp.txt | sed "s/.*| graph/graph/"; grep -E "gate_up|down" $OUT/bench_gemm.txt | cut -c1-120; tail -n 1 $OUT/tests.txt
