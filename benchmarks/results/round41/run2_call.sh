#!/usr/bin/env bash
# forty-first round, run 2: where the card is an H200 (the H200 has not run the descriptor int8 GEMM): the decode
# benches and the targets table (round 37's run1_call.sh), trace_mlp at 16 / 256 / 1024 tokens and the int8 sweep at
# 1024 / 4096 tokens; one archive back, the targets table last. On any other card it stops after naming it.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "card: $name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
bash benchmarks/results/round37/run1_call.sh > /tmp/run2_benches.txt 2>&1
R=/tmp/run2; mkdir -p $R; mv /tmp/run1 $R/benches; mv /tmp/run2_benches.txt $R/
echo "benches done at ${SECONDS} s" >> $R/rcs.txt
timeout 90 python3 -m benchmarks.trace_mlp --m 16,256,1024 --calls 4 --out $R/trace > $R/trace.txt 2>&1; echo "trace rc $? at ${SECONDS} s" >> $R/rcs.txt
timeout $((570 - SECONDS)) python3 -m benchmarks.sweep_int8_gemm --ms 1024,4096 --out $R/int8 > $R/int8_sweep.txt 2>&1; echo "int8 sweep rc $? at ${SECONDS} s" >> $R/rcs.txt
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/benches/device.txt $R/benches/rcs.txt $R/rcs.txt; grep "sum over shapes" $R/int8_sweep.txt | cut -c1-250
grep -E "^M=" $R/trace.txt | cut -c1-250
grep "^mlp M=" $R/benches/bench_mlp.txt | cut -c1-250; sed -n '/decode targets/,$p' $R/benches/report.txt | cut -c1-250
