#!/usr/bin/env bash
# nineteenth round, call 2: the MLP at M between buckets, base / fix / fix / base (separate processes), bits
# compared; bench mlp --quick at the buckets and between them with the fix
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
for turn in base fix fix2 base2; do
  case $turn in base*) git apply -R .scratch/fix19.patch ;; esac
  timeout 120 python3 .scratch/mlp19.py $turn /tmp/bits_$turn.pt >> $OUT/mlp_ab.txt 2>&1; echo "mlp $turn rc $?" >> $OUT/rcs.txt
  case $turn in base*) git apply .scratch/fix19.patch ;; esac
done
python3 -c "
import torch
a = {t: torch.load(f'/tmp/bits_{t}.pt') for t in ('base', 'fix', 'fix2', 'base2')}
for m in a['base']:
    print('bits M', m, {n: all(torch.equal(a['base'][m][n], a[t][m][n]) for t in ('fix', 'fix2', 'base2')) for n in a['base'][m]})
" >> $OUT/mlp_ab.txt 2>&1
git diff --stat >> $OUT/commit.txt
timeout 200 python3 -m fused_quant bench mlp --quick --m 1,16,48,64,100,192,224,256,1024 --out $OUT/mlp > $OUT/bench_mlp.txt 2>&1; echo "bench mlp rc $?" >> $OUT/rcs.txt
cat $OUT/rcs.txt; grep -v "^raw" $OUT/mlp_ab.txt | cut -c1-300; grep "^mlp M=" $OUT/bench_mlp.txt | sed "s/.*| graph/graph/" | paste -d" " <(grep "^mlp M=" $OUT/bench_mlp.txt | cut -c1-14) -
