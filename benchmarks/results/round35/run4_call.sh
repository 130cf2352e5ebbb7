#!/usr/bin/env bash
# thirty-fifth round, run 4: another decoder through --model (Qwen2-7B's sizes, qwen2-7b-config.json): the small-M
# sweep of its o linear (int8, 1 and 16 tokens) installed beside Llama-3-8B's rows, bench gemm on its four linears,
# bench mlp as one of two tensor-parallel GPUs holds it, trace_mlp; every step's output in one archive
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run4; mkdir -p $R; C=benchmarks/results/round35/qwen2-7b-config.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run4_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run4_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run4_rcs.txt; tar czf $OUT/run4.tgz -C /tmp run4; }
step sweep 150 python3 -m benchmarks.sweep_small_m_gemm --model $C --shapes o --kinds int8 --ms 1,16 --out $R/sweep --install
step bench_gemm 120 python3 -m fused_quant bench gemm --model $C --m 1,16,64 --quick --out $R/gemm
step bench_mlp 90 python3 -m fused_quant bench mlp --model $C --tp 2 --m 1,16 --quick --out $R/mlp
step trace 60 python3 -m benchmarks.trace_mlp --model $C --m 1 --out $R/trace
cp fused_quant/kernels/small_m_gemm_configs.json $R/run4_small_m_gemm_configs_as_installed.json
tar czf $OUT/run4.tgz -C /tmp run4
cat $R/run4_device.txt $R/run4_rcs.txt; grep -E "^int8|wrote|changed" $R/run4_sweep.txt | cut -c1-160
grep -E "^bench|^gemm" $R/run4_bench_gemm.txt | cut -c1-150; grep -E "^bench|^mlp" $R/run4_bench_mlp.txt | cut -c1-330
grep -E "^M=" $R/run4_trace.txt | cut -c1-200
