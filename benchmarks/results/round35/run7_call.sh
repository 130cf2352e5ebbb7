#!/usr/bin/env bash
# thirty-fifth round, run 7 (the last device seconds): on an H200, the final package's bench mlp, bench host and bench
# gemm (the decode issue's targets on its device); on any other GPU, the GPU tests of test_small_m_gemm.py that read
# the table's rows (the lookup changed in 96e3bbe) and of the quantizing calls. Outputs in one archive, the lines last
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/run7; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/run7_device.txt
step() { local name=$1 t=$2; shift 2; local s=$(date +%s); timeout $t "$@" > $R/run7_$name.txt 2>&1; echo "$name rc $? $(( $(date +%s) - s )) s" >> $R/run7_rcs.txt; tar czf $OUT/run7.tgz -C /tmp run7; }
if grep -q H200 $R/run7_device.txt; then
  step bench_mlp 70 python3 -m fused_quant bench mlp --out $R/mlp
  step bench_host 35 python3 -m fused_quant bench host --out $R/host
  step bench_gemm 80 python3 -m fused_quant bench gemm --out $R/gemm
else
  step lookup_tests 200 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" tests/kernels/test_small_m_gemm.py tests/test_quantizing_calls_bench.py -k "config or table or swept or way or quantizing"
fi
cat $R/run7_device.txt $R/run7_rcs.txt; grep "^mlp M=" $R/run7_bench_mlp.txt 2>/dev/null | cut -c1-330
grep "^host" $R/run7_bench_host.txt 2>/dev/null | cut -c1-250; grep -E "^gemm" $R/run7_bench_gemm.txt 2>/dev/null | grep -E "M= +(1|16|64) " | cut -c1-110
tail -n 3 $R/run7_lookup_tests.txt 2>/dev/null
