#!/usr/bin/env bash
# twenty-sixth round, run 4: the changed small-M rows at 32 / 64 tokens, old config against new, taking turns
# (run4_rows_ab.py); run 3's bench gemm had FP8 o at 32 unchanged where run 1's search had it 1.4 us faster
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
timeout 300 python3 benchmarks/results/round26/run4_rows_ab.py benchmarks/results/round26/run4_old_rows.json $OUT/run4_rows_ab.json > $OUT/run4_rows_ab.txt 2>&1; echo "rows A/B rc $?" >> $OUT/run4_rows_ab.txt
cat $OUT/run4_rows_ab.txt | tail -n 20
