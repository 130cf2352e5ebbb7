#!/usr/bin/env bash
# twentieth round, run 2: token blocks on the grid's axis 0 (.scratch/swap.patch) against the committed order
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
git diff --stat >> $OUT/commit.txt 2>&1
timeout 200 python3 .scratch/swap_ab.py base $OUT/bits_base.json > $OUT/ab_base.txt 2>&1; echo "base rc $?" >> $OUT/rcs.txt
git apply .scratch/swap.patch; echo "apply rc $?" >> $OUT/rcs.txt
timeout 200 python3 .scratch/swap_ab.py swap $OUT/bits_swap.json > $OUT/ab_swap.txt 2>&1; echo "swap rc $?" >> $OUT/rcs.txt
git apply -R .scratch/swap.patch
cat $OUT/rcs.txt; python3 -c "
import json; a=json.load(open('$OUT/bits_base.json')); b=json.load(open('$OUT/bits_swap.json'))
print('same bits', sum(a[k]==b[k] for k in a), 'of', len(a), 'differ:', [k for k in a if a[k]!=b.get(k)][:5])"
paste -d'\n' $OUT/ab_base.txt $OUT/ab_swap.txt | cut -c1-200
