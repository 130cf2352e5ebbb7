#!/usr/bin/env bash
# twentieth round, run 3 (tokens-first grid): a full search of int8 gate_up at M = 160 / 192 / 256, then every row at
# the buckets where several token blocks can run (128-256) retimed beside the torch providers, installed on this copy;
# bench mlp at the decode token counts; the table's GPU tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/commit.txt
timeout 150 python3 -m benchmarks.sweep_small_m_gemm --out /tmp/sweep --kinds int8 --shapes gate_up --ms 160,192,256 --install > $OUT/sweep.txt 2>&1; echo "sweep rc $?" >> $OUT/rcs.txt
timeout 80 python3 -m benchmarks.sweep_small_m_gemm --out /tmp/retime --retime --ms 128,160,192,256 --install > $OUT/retime.txt 2>&1; echo "retime rc $?" >> $OUT/rcs.txt
cp fused_quant/kernels/small_m_gemm_configs.json $OUT/table_after.json
timeout 120 python3 -m fused_quant bench mlp --quick --m 1,16,64,100,128,136,160,192,224,256 --out /tmp/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/rcs.txt
cp /tmp/mlp/*.json $OUT/ 2>/dev/null
FUSED_QUANT_BACKEND=triton_fp8 timeout 60 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py -k "chain_picks or table or bucket or retime" -rf > $OUT/tests.txt 2>&1; echo "tests rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep -E "^(fp8|int8)" $OUT/sweep.txt | cut -c1-220; grep -E "^(fp8|int8)" $OUT/retime.txt | cut -c1-150
grep "^mlp M=" $OUT/bench_mlp.txt | sed "s/ bf16 eager.*| graph/ graph/"; tail -n 1 $OUT/tests.txt
