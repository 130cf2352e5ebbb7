#!/usr/bin/env bash
# thirty-fifth round, run 1 (for an H200): the final package's full bench mlp, a bench host turn and bench gemm (every
# target of the decode issue), then benchmarks/quantizing_calls.py --install for int8 on this GPU (the sm_90 rows
# measured on it) and bench mlp --quick at 1 and 16 tokens on that table; everything in one archive, written after
# each step; the short tables last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run1_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run1_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run1_rcs.txt; tar czf $OUT/run1.tgz -C /tmp run1; }
step bench_mlp 90 python3 -m fused_quant bench mlp --out $R/mlp
step bench_host 40 python3 -m fused_quant bench host --out $R/host
step bench_gemm 100 python3 -m fused_quant bench gemm --out $R/gemm
step quantizing_calls 150 python3 -m benchmarks.quantizing_calls --kinds int8 --install --out $R/qc
cp fused_quant/kernels/small_m_quantizing_configs.json $R/run1_small_m_quantizing_configs_as_installed.json
step mlp_table 45 python3 -m fused_quant bench mlp --quick --m 1,16 --out $R/mlp_table
tar czf $OUT/run1.tgz -C /tmp run1
cat $R/run1_device.txt $R/run1_rcs.txt; grep "^mlp M=" $R/run1_bench_mlp.txt | cut -c1-330; grep "^host" $R/run1_bench_host.txt | cut -c1-250
grep -E "^gemm" $R/run1_bench_gemm.txt | grep -E "M= +(1|16|64) " | cut -c1-110
grep -E "\*|producer|installed" $R/run1_quantizing_calls.txt | cut -c1-130; grep "^mlp M=" $R/run1_mlp_table.txt | cut -c1-330
