#!/usr/bin/env bash
# twentieth round, run 1: the MLP at token counts between 128 and 256 with the installed table; a full search at
# the 160 / 192 buckets for gate_up and down (the MLP's GEMMs), installed on this copy; the MLP again; the table's tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/commit.txt
MS=136,160,176,192,224
timeout 80 python3 -m fused_quant bench mlp --quick --m $MS --out /tmp/mlp_before > $OUT/bench_mlp_before.txt 2>&1; echo "bench mlp before rc $?" >> $OUT/rcs.txt
timeout 290 python3 -m benchmarks.sweep_small_m_gemm --out /tmp/sweep --shapes gate_up,down --ms 160,192 > $OUT/sweep.txt 2>&1; echo "sweep rc $?" >> $OUT/rcs.txt
cp /tmp/sweep/small_m_gemm_configs.json $OUT/sweep_rows.json
python3 -c "from pathlib import Path; from benchmarks.sweep_small_m_gemm import install; install(Path('/tmp/sweep/small_m_gemm_configs.json'))"; echo "install rc $?" >> $OUT/rcs.txt
cp fused_quant/kernels/small_m_gemm_configs.json $OUT/table_after.json
timeout 80 python3 -m fused_quant bench mlp --quick --m $MS --out /tmp/mlp_after > $OUT/bench_mlp_after.txt 2>&1; echo "bench mlp after rc $?" >> $OUT/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 60 python3 -m pytest -q -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py -k "chain_picks or table or bucket or retime" -rf > $OUT/tests.txt 2>&1; echo "tests rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep -E "^(fp8|int8)" $OUT/sweep.txt | cut -c1-220
for f in before after; do echo "== $f"; grep "^mlp M=" $OUT/bench_mlp_$f.txt | sed "s/bf16 eager.*| graph/graph/"; done; tail -n 1 $OUT/tests.txt
