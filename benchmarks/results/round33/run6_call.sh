#!/usr/bin/env bash
# thirty-third round, run 6 (planned, not run yet; for an H200 where one is given, about 2 minutes): run6_ab.py (the
# per-token quantizing call with a larger L2 prefetch budget), then run5_call.sh's sweep A/B and bench mlp --quick on
# the same machine: the eager per-token MLPs at one token on the device. Two archives back, short tables last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run6_device.txt
timeout 200 python3 benchmarks/results/round33/run6_ab.py 3 $R/run6_ab.json > $R/run6_ab.txt 2>&1; echo "ab rc $?" >> $R/run6_rcs.txt
tar czf $OUT/run6.tgz -C /tmp run6
bash benchmarks/results/round33/run5_call.sh
cat $R/run6_device.txt $R/run6_rcs.txt
grep "^bits" $R/run6_ab.txt | grep -c equal; grep "^bits" $R/run6_ab.txt | grep -v equal
sed -n "/^median over turns/,\$p" $R/run6_ab.txt
