#!/usr/bin/env bash
# twenty-ninth round, run 4: the MLP at M = 4096, where per-token keys' graph replays took longer than their eager calls
# (run 3: FP8 per-token 1551.8 against 1245.4 us, int8 per-token 1705.8 against 1635.1): bench mlp --m 4096 three
# times, programmatic dependent launch on / off / on (FUSED_QUANT_PDL), each a process of its own
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run4_commit.txt 2>/dev/null; git status --short | head >> $OUT/run4_commit.txt
i=0
for pdl in on off on; do
  i=$((i + 1))
  FUSED_QUANT_PDL=$pdl timeout 90 python3 -m fused_quant bench mlp --quick --m 4096 --out /tmp/mlp$i > $OUT/run4_mlp_$i.txt 2>&1
  echo "pass $i PDL $pdl rc $?" >> $OUT/run4_mlp_$i.txt
done
for i in 1 2 3; do tail -n 2 $OUT/run4_mlp_$i.txt | cut -c1-330; done
