#!/usr/bin/env bash
# thirty-fourth round, run 1: the whole GPU matrix on the final package (round 31's run1_call.sh, .whl carried; each
# row's limit 450 s, the H200 took at most 321 s in round 31), then the full bench mlp on the same machine; the
# suite's archive and summary, the bench's table, JSON and plot back; the MLP table last
export PYTHONUNBUFFERED=1
T=450 bash benchmarks/results/round31/run1_call.sh
export PYTHONPATH=$PWD
timeout 120 python3 -m fused_quant bench mlp --out /tmp/run1_mlp > $OUT/run1_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run1_bench_mlp.txt
cp /tmp/run1_mlp/mlp.json $OUT/run1_mlp.json; cp /tmp/run1_mlp/mlp.png $OUT/run1_mlp.png
grep -E "passed|failed|error|^NVIDIA| rc " $OUT/run1_suite_summary.txt | cut -c1-120
grep "^mlp M=" $OUT/run1_bench_mlp.txt | cut -c1-330; tail -n 1 $OUT/run1_bench_mlp.txt
