#!/usr/bin/env bash
# thirty-third round, run 3: the per-token absmax sweep in wide tiles (gemm_launch.sweep_width). run3_ab.py first,
# alone on the GPU (the sweep as before, "narrow", against the wide one and against no quantizing call, int8 and
# FP8 per-token, 1 and 16 tokens, eager / host / graph, captured variants, bits), then bench mlp --quick at 1, 16,
# 64 tokens, then (two processes side by side) the small-M file's GPU ids of the quantizing call (bits against the producer then the GEMM,
# adversarial rows, the table's rows fitting shared memory); one archive back, a short table last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run3_device.txt
git log -1 --format=%H >> $R/run3_device.txt; git status --short | head >> $R/run3_device.txt
timeout 150 python3 benchmarks/results/round33/run3_ab.py 3 $R/run3_ab.json > $R/run3_ab.txt 2>&1; echo "ab rc $?" >> $R/run3_rcs.txt
timeout 90 python3 -m fused_quant bench mlp --quick --m 1,16,64 --out $R/mlp > $R/run3_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $R/run3_rcs.txt
K1="quantizing_kernel_is_the_producer"; K2="(quantiz or sweep or fits) and not $K1"
timeout 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_small_m_gemm.py -k "$K1" > $R/run3_test1.txt 2>&1 & P=$!
timeout 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_small_m_gemm.py -k "$K2" > $R/run3_test2.txt 2>&1; echo "test2 rc $?" >> $R/run3_rcs.txt
wait $P; echo "test1 rc $?" >> $R/run3_rcs.txt
tar czf $OUT/run3.tgz -C /tmp run3
cat $R/run3_device.txt $R/run3_rcs.txt; tail -qn 1 $R/run3_test1.txt $R/run3_test2.txt
grep "^bits" $R/run3_ab.txt | grep -c equal; grep "^bits" $R/run3_ab.txt | grep -v equal
sed -n "/^median over turns/,\$p" $R/run3_ab.txt; grep "^mlp M=" $R/run3_bench_mlp.txt | cut -c1-330
