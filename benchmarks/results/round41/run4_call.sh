#!/usr/bin/env bash
# forty-first round, run 4: on an H200, round 41's run 2 (the decode benches, trace_mlp, the int8 sweep); on any other
# card, the small-M table's configs this GPU model takes now timed again beside the torch providers, written as the
# model's own rows (sweep_small_m_gemm --retime --own-rows; installed afterwards from the JSON that comes back)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "card: $name"
case "$name" in *H200*) exec bash benchmarks/results/round41/run2_call.sh;; esac
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
timeout 540 python3 -m benchmarks.sweep_small_m_gemm --retime --own-rows --out $R/sweep > $R/sweep.txt 2>&1
echo "retime rc $? at ${SECONDS} s" >> $R/rcs.txt
tar czf $OUT/run4.tgz -C /tmp run4
cat $R/device.txt $R/rcs.txt; tail -n 4 $R/sweep.txt | cut -c1-250
