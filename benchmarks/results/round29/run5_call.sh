#!/usr/bin/env bash
# twenty-ninth round, run 5 (the command as it ran, on the machine run 4 started): bench host --quick, then bench mlp
# --quick at M = 1, 16, 64
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1; git log -1 --format=%H > $OUT/run5_commit.txt; timeout 70 python3 -m fused_quant bench host --quick --out /tmp/host > $OUT/run5_bench_host.txt 2>&1; echo "host rc $?" >> $OUT/run5_bench_host.txt; timeout 80 python3 -m fused_quant bench mlp --quick --m 1,16,64 --out /tmp/mlp > $OUT/run5_bench_mlp.txt 2>&1; echo "mlp rc $?" >> $OUT/run5_bench_mlp.txt; tail -n 6 $OUT/run5_bench_host.txt | cut -c1-330; grep "^mlp\|rc" $OUT/run5_bench_mlp.txt | cut -c1-330
