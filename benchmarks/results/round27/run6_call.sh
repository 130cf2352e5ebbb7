#!/usr/bin/env bash
# twenty-seventh round, run 6: bench mlp --quick again on run 5's machine, the load average before and after (run 5's
# eager columns at M = 64 / 256 fell well below run 3's with the GPU times unchanged); run as one command line
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; git log -1 --format=%H > $OUT/run6_commit.txt; uptime > $OUT/run6_load.txt; timeout 80 python3 -m fused_quant bench mlp --quick --out /tmp/mlp6 > $OUT/run6_bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/run6_bench_mlp.txt; cp /tmp/mlp6/mlp.json $OUT/run6_mlp.json; uptime >> $OUT/run6_load.txt; grep "^mlp M=" $OUT/run6_bench_mlp.txt | cut -c1-330; cat $OUT/run6_load.txt
