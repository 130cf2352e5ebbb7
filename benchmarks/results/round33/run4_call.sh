#!/usr/bin/env bash
# thirty-third round, run 4: the whole GPU matrix on the final tree (run1_call.sh, .whl carried), then the full bench
# mlp; the suite's archive and summary, and the bench's JSON and plot, back
bash benchmarks/results/round33/run1_call.sh
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 150 python3 -m fused_quant bench mlp --out /tmp/run4_mlp > $OUT/run4_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run4_bench_mlp.txt
cp /tmp/run4_mlp/mlp.json $OUT/run4_mlp.json; cp /tmp/run4_mlp/mlp.png $OUT/run4_mlp.png
grep "^mlp M=" $OUT/run4_bench_mlp.txt | cut -c1-330; tail -n 1 $OUT/run4_bench_mlp.txt
