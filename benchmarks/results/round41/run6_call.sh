#!/usr/bin/env bash
# forty-first round, run 6: the GPU tests run 5 left open, on the tree with the H100's own small-M rows: the chain's
# picks against the rows this GPU takes (the test changed after run 5), the committed table's tests, and the
# triton_fp8 row's tests that its 330 s limit cut off (tests/test_pure_torch.py); on an H200 also bench gemm and
# bench mlp and their targets (that card takes the arch's rows)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run6; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
git log -1 --format=%H >> $R/device.txt 2>/dev/null; git status --short | head >> $R/device.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 200 python3 -m pytest -q -p no:cacheprovider -m "triton_fp8 or (gpu and not hip_w8a8)" \
  tests/kernels/test_small_m_gemm.py -k "chain_picks or committed" tests/test_pure_torch.py > $R/tests.txt 2>&1
echo "tests rc $? at ${SECONDS} s" >> $R/rcs.txt
if grep -q H200 $R/device.txt; then
  timeout 100 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1; echo "bench gemm rc $? at ${SECONDS} s" >> $R/rcs.txt
  timeout 120 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; echo "bench mlp rc $? at ${SECONDS} s" >> $R/rcs.txt
  python3 -m benchmarks.report $R/gemm/gemm.json $R/mlp/mlp.json --sqnr-baseline benchmarks/results/round31/run2_mlp.json \
    > $R/report.txt 2>&1; echo "report rc $?" >> $R/rcs.txt
fi
tar czf $OUT/run6.tgz -C /tmp run6
cat $R/device.txt $R/rcs.txt; tail -n 3 $R/tests.txt; grep "^mlp M=" $R/bench_mlp.txt 2>/dev/null | cut -c1-200
tail -n 16 $R/report.txt 2>/dev/null | cut -c1-250
