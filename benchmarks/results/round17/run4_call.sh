#!/usr/bin/env bash
# round 17 call 4 (final code): bench mlp with SQNR, the SQNR with the old and new table, then the GPU matrix
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
timeout 200 python3 -m fused_quant bench mlp --quick --out $FINAL/mlp > $FINAL/bench_mlp.txt 2>&1; echo "bench mlp rc $?" > $FINAL/rcs_pre.txt
timeout 90 python3 .scratch/ab17s.py .scratch/old_table.json > $FINAL/ab17s.txt 2>&1; echo "ab17s rc $?" >> $FINAL/rcs_pre.txt
mkdir -p /tmp/suite
OUT=/tmp/suite T=${T:-440} bash .scratch/suite_par.sh > $FINAL/suite_summary.txt 2>&1
tar czf $FINAL/suite.tgz -C /tmp suite
tar czf $FINAL/mlp.tgz -C $FINAL mlp
cat $FINAL/rcs_pre.txt; grep "^mlp" $FINAL/bench_mlp.txt | cut -c1-330; cat $FINAL/ab17s.txt; tail -n 30 $FINAL/suite_summary.txt
