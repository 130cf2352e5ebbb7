#!/usr/bin/env bash
# the committed small-M kernel, then with rm % M (a patch), the same GEMMs
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 200 python3 .scratch/m224e.py base > $OUT/m224e.txt 2>&1; echo "base rc $?" >> $OUT/rcs.txt
git apply .scratch/rm_mod_m.patch || patch -p1 < .scratch/rm_mod_m.patch; echo "patch rc $?" >> $OUT/rcs.txt
timeout 200 python3 .scratch/m224e.py rm_mod_m >> $OUT/m224e.txt 2>&1; echo "rm_mod_m rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep -E "^(base|rm_mod_m)" $OUT/m224e.txt | cut -c1-400
