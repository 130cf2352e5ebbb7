#!/usr/bin/env bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
timeout 280 python3 .scratch/exp18.py > $OUT/exp18.txt 2>&1; echo "exp18 rc $?" >> $OUT/rcs.txt
timeout 200 python3 -m fused_quant bench mlp --quick --out $OUT/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/rcs.txt
tar czf $OUT/mlp.tgz -C $OUT mlp && rm -rf $OUT/mlp
cat $OUT/rcs.txt; cut -c1-230 $OUT/exp18.txt | tail -n 70; grep "^mlp" $OUT/bench_mlp.txt | cut -c1-330
