#!/usr/bin/env bash
# thirty-fifth round, run 5: does a sweep of another decoder's own shapes lift the rows where the nearest of
# Llama-3-8B's shapes picked slower than torch (run 4: FP8 gate_up at 1 and 64, FP8 qkv and int8 gate_up at 64)?
# bench gemm on Qwen2-7B's sizes at 1, 16 and 64 tokens before, the sweep of its qkv and gate_up (both kinds, at 1
# and 64 tokens) installed into the device's copy of the table, bench gemm after; one archive, the lines last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run5; mkdir -p $R; C=benchmarks/results/round35/qwen2-7b-config.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run5_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run5_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run5_rcs.txt; tar czf $OUT/run5.tgz -C /tmp run5; }
step gemm_before 60 python3 -m fused_quant bench gemm --model $C --m 1,16,64 --quick --out $R/before
step sweep 420 python3 -m benchmarks.sweep_small_m_gemm --model $C --shapes qkv,gate_up --ms 1,64 --out $R/sweep --install
step gemm_after 60 python3 -m fused_quant bench gemm --model $C --m 1,16,64 --quick --out $R/after
tar czf $OUT/run5.tgz -C /tmp run5
cat $R/run5_device.txt $R/run5_rcs.txt; grep -E "^(fp8|int8)|wrote|changed" $R/run5_sweep.txt | cut -c1-150
for f in before after; do echo "== $f"; grep -E "^gemm" $R/run5_gemm_$f.txt | grep -E "qkv|gate_up" | cut -c1-120; done
