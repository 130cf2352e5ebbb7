#!/usr/bin/env bash
# round 17 call 3: the MLP with the old and the new table in turns; the silu producer's window; bench host
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
timeout 200 python3 .scratch/ab17.py .scratch/old_table.json > $OUT/ab17.txt 2>&1; echo "ab17 rc $?" >> $OUT/rcs.txt
timeout 90 python3 .scratch/exp17c.py > $OUT/exp17c.txt 2>&1; echo "exp17c rc $?" >> $OUT/rcs.txt
timeout 150 python3 -m fused_quant bench host --quick --out $OUT/host > $OUT/bench_host.txt 2>&1; echo "bench host rc $?" >> $OUT/rcs.txt
tar czf $OUT/host.tgz -C $OUT host
cat $OUT/rcs.txt; grep -v "^raw" $OUT/ab17.txt | tail -n 8; cat $OUT/exp17c.txt; tail -n 25 $OUT/bench_host.txt | cut -c1-220
