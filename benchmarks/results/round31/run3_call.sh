#!/usr/bin/env bash
# thirty-first round, run 3: the A/B of per-token quantizing in eager gate_up calls (run3_ab.py: each variant's rule
# set by the script), then on the tree's rule (a per-token key's one-token block leaves a float input to the
# producer) test_decode_gpu.py on both GPU backends and bench mlp --quick at 1, 16, 64 tokens; a table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run3_device.txt
git status --short | head -20 >> $R/run3_device.txt
timeout 260 python3 benchmarks/results/round31/run3_ab.py 3 $R/run3_ab.json > $R/run3_ab.txt 2>&1; echo "ab rc $?" >> $R/run3_rcs.txt
for b in triton_fp8 hip_w8a8; do
  FUSED_QUANT_BACKEND=$b timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_decode_gpu.py > $R/run3_decode_$b.txt 2>&1; echo "decode $b rc $?" >> $R/run3_rcs.txt
done
timeout 120 python3 -m fused_quant bench mlp --quick --m 1,16,64 --out $R/mlp > $R/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run3_rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/run3_device.txt $R/run3_rcs.txt; tail -n 1 $R/run3_decode_*.txt; sed -n '/^median over turns/,$p' $R/run3_ab.txt
grep "^mlp M=" $R/run3_bench_mlp.txt | cut -c1-330
