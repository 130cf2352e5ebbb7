#!/usr/bin/env bash
# forty-first round, run 1 (one call): the decode benches and the targets table (round 37's run1_call.sh), then the
# whole GPU matrix (round 37's run2_call.sh, .whl carried, each row's limit 330 s), on the package named in
# commits.txt; where the card is an H200 and time is left, the int8 sweep at 1024 / 4096 tokens (the descriptor
# kernel's first run on that card)
SECONDS=0
bash benchmarks/results/round37/run1_call.sh
echo "benches done at ${SECONDS} s"
T=330 bash benchmarks/results/round37/run2_call.sh
echo "matrix done at ${SECONDS} s"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "$SECONDS" -lt 470 ]; then
  R=/tmp/run1_int8; mkdir -p $R
  PYTHONPATH=$PWD timeout $((575 - SECONDS)) python3 -m benchmarks.sweep_int8_gemm --ms 1024,4096 --out $R/int8 \
    > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $? at ${SECONDS} s" >> $R/int8_sweep.txt
  tar czf $OUT/run1_int8.tgz -C /tmp run1_int8
  grep "sum over shapes" $R/int8_sweep.txt | cut -c1-250; tail -n 1 $R/int8_sweep.txt
fi
