#!/usr/bin/env bash
# thirty-second round, run 2 (planned, not run yet): quantizing_config on an H200 (the int8 per-token quantizing call
# at one token in the table's 2-token MMA row): its GPU bits test, round 31 run 4's A/B of the three rows (run2_ab.py) and
# bench mlp --quick at 1, 16, 64 tokens; one archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run2_device.txt
git status --short | head >> $R/run2_device.txt
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_small_m_gemm.py -k "one_token_rows_bits or 2_token_row" > $R/run2_test.txt 2>&1; echo "test rc $?" >> $R/run2_rcs.txt
timeout 240 python3 benchmarks/results/round32/run2_ab.py 3 $R/run2_ab.json > $R/run2_ab.txt 2>&1; echo "ab rc $?" >> $R/run2_rcs.txt
timeout 150 python3 -m fused_quant bench mlp --quick --m 1,16,64 --out $R/mlp > $R/run2_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run2_rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/run2_device.txt $R/run2_rcs.txt; tail -n 3 $R/run2_test.txt; grep "^bits" $R/run2_ab.txt | grep -c equal
sed -n "/^median over turns/,\$p" $R/run2_ab.txt; grep "^mlp M=" $R/run2_bench_mlp.txt | cut -c1-330
