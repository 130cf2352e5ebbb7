#!/usr/bin/env bash
# thirty-fourth round, run 2 (right after run 1, same machine): the decode benches the targets are read from (bench
# gemm, bench host twice, trace_mlp at 1 and 16 tokens), then benchmarks/quantizing_calls.py (its GPU test first) on gate_up and down at 1
# and 16 tokens (every per-token quantizing call's config against the producer then the GEMM, bits compared); each
# step's seconds logged; one archive back, short tables last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
R=/tmp/run2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run2_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run2_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run2_rcs.txt; }
step qc_test 60 python3 -m pytest -q -p no:cacheprovider tests/test_quantizing_calls_bench.py
step bench_gemm 160 python3 -m fused_quant bench gemm --out $R/gemm
step bench_host1 70 python3 -m fused_quant bench host --out $R/host1
step bench_host2 70 python3 -m fused_quant bench host --out $R/host2
step trace 70 python3 -m benchmarks.trace_mlp --m 1,16 --out $R/trace
step quantizing_calls 130 python3 -m benchmarks.quantizing_calls --shapes gate_up,down --ms 1,16 --out $R/qc
tar czf $OUT/run2.tgz -C /tmp run2
cat $R/run2_device.txt $R/run2_rcs.txt; tail -n 1 $R/run2_qc_test.txt
grep -h "^host" $R/run2_bench_host?.txt | cut -c1-250
grep -E "^gemm" $R/run2_bench_gemm.txt | grep -E "M= +(1|16|64) " | cut -c1-120
grep -E "x[0-9]|\*|GEMM " $R/run2_quantizing_calls.txt | cut -c1-140 | tail -n 40
