#!/usr/bin/env bash
# thirty-fifth round, run 6: run 5's partial sweep (Qwen2-7B's qkv and gate_up at 1 and 64 tokens) installed again,
# on the package where a shape swept at some buckets only no longer hides the fully swept shapes at the others
# (gemm_launch._swept_row); bench gemm on Qwen2-7B's sizes at 1, 16 and 64 tokens; the lines last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run6; mkdir -p $R; C=benchmarks/results/round35/qwen2-7b-config.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run6_device.txt
tar xzf benchmarks/results/round35/run5.tgz -O run5/sweep/small_m_gemm_configs.json > $R/run5_table.json
python3 -c "from pathlib import Path; from benchmarks.sweep_small_m_gemm import install; print(install(Path('$R/run5_table.json')))" > $R/run6_install.txt 2>&1
timeout 60 python3 -m fused_quant bench gemm --model $C --m 1,16,64 --quick --out $R/gemm > $R/run6_gemm.txt 2>&1; echo "bench gemm rc $?" >> $R/run6_device.txt
tar czf $OUT/run6.tgz -C /tmp run6
cat $R/run6_device.txt $R/run6_install.txt; grep -E "^gemm" $R/run6_gemm.txt | cut -c1-120
