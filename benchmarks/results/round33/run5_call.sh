#!/usr/bin/env bash
# thirty-third round, run 5 (for an H200): run3_ab.py (the wide sweep against the narrow one and against no
# quantizing call, int8 and FP8 per-token, 1 and 16 tokens) and bench mlp --quick at 1, 16, 64 tokens on the final
# tree: the eager per-token MLPs at one token on the device; one archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run5_device.txt
timeout 150 python3 benchmarks/results/round33/run3_ab.py 3 $R/run5_ab.json > $R/run5_ab.txt 2>&1; echo "ab rc $?" >> $R/run5_rcs.txt
timeout 90 python3 -m fused_quant bench mlp --quick --m 1,16,64 --out $R/mlp > $R/run5_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run5_rcs.txt
tar czf $OUT/run5.tgz -C /tmp run5
cat $R/run5_device.txt $R/run5_rcs.txt
grep "^bits" $R/run5_ab.txt | grep -c equal; grep "^bits" $R/run5_ab.txt | grep -v equal
sed -n "/^median over turns/,\$p" $R/run5_ab.txt; grep "^mlp M=" $R/run5_bench_mlp.txt | cut -c1-330
