#!/usr/bin/env bash
# thirty-fourth round, run 3: benchmarks/quantizing_calls.py --install for int8 (FP8 at 1 and 16 tokens for the record) (the bits check against the same config's plain
# GEMM, and for int8 the table row's too; one-token rows of 4-64 weight rows) on the four Llama-3-8B shapes, int8 and
# FP8 per-token at 1-16 tokens; the int8 rows' fastest configs installed (quantizing_config reads them); then on that
# table the GPU tests of the quantizing calls (bits, fits) and test_decode_gpu.py's int8 per-token ids on both GPU
# backends; then the eager / graph MLP A/B: bench mlp --quick at 1 and 16 tokens with the installed table and without
# it (the 2-token rule), in turns. The table, one archive back (written after each step); short tables last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run3_device.txt
git status --short | head -20 >> $R/run3_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run3_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run3_rcs.txt; tar czf $OUT/run3.tgz -C /tmp run3; }
step quantizing_calls 130 python3 -m benchmarks.quantizing_calls --kinds int8 --install --out $R/qc
step quantizing_calls_fp8 45 python3 -m benchmarks.quantizing_calls --kinds fp8 --ms 1,16 --out $R/qc_fp8
cp fused_quant/kernels/small_m_quantizing_configs.json $OUT/ 2>/dev/null
step qtests 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_small_m_gemm.py tests/test_quantizing_calls_bench.py -k "quantizing"
for b in triton_fp8 hip_w8a8; do
  FUSED_QUANT_BACKEND=$b step decode_$b 80 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_decode_gpu.py -k int8_dynamic_token
done
T=fused_quant/kernels/small_m_quantizing_configs.json
for turn in 1 2; do
  step mlp_table$turn 45 python3 -m fused_quant bench mlp --quick --m 1,16 --out $R/mlp_table$turn
  mv $T /tmp/q.json
  step mlp_rule$turn 45 python3 -m fused_quant bench mlp --quick --m 1,16 --out $R/mlp_rule$turn
  mv /tmp/q.json $T
done
cat $R/run3_device.txt $R/run3_rcs.txt; tail -n 1 $R/run3_qtests.txt $R/run3_decode_*.txt
grep -E "\*|producer" $R/run3_quantizing_calls.txt | cut -c1-130; grep -E "\*|producer" $R/run3_quantizing_calls_fp8.txt | cut -c1-130
grep installed $R/run3_quantizing_calls.txt
for f in table1 rule1 table2 rule2; do echo "== $f"; grep "^mlp M=" $R/run3_mlp_$f.txt | cut -c1-330; done
