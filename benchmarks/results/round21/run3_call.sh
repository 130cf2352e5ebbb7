#!/usr/bin/env bash
# twenty-first round, run 3: the M = 32 MLP with PDL on and off (FP8 static, then int8 static with PDL on),
# kernel times from a profile; the producing kernel's GPU tests after the float-form fix
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
git log -1 --format=%H > $OUT/run3_commit.txt 2>/dev/null; git status --short | head >> $OUT/run3_commit.txt
timeout 100 python3 benchmarks/results/round21/run3_mlp_m32.py > $OUT/run3_pdl_on.txt 2>&1; echo "pdl on rc $?" >> $OUT/run3_rcs.txt
FUSED_QUANT_PDL=off timeout 100 python3 benchmarks/results/round21/run3_mlp_m32.py > $OUT/run3_pdl_off.txt 2>&1; echo "pdl off rc $?" >> $OUT/run3_rcs.txt
KIND=int8 timeout 100 python3 benchmarks/results/round21/run3_mlp_m32.py > $OUT/run3_int8_pdl_on.txt 2>&1; echo "int8 pdl on rc $?" >> $OUT/run3_rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 100 python3 -m pytest -q -m "gpu and not hip_w8a8" tests/kernels/test_small_m_gemm.py -k "producing" -rf > $OUT/run3_tests.txt 2>&1; echo "tests kernel rc $?" >> $OUT/run3_rcs.txt
cat $OUT/run3_rcs.txt; tail -n 1 $OUT/run3_tests.txt; cat $OUT/run3_pdl_on.txt $OUT/run3_pdl_off.txt $OUT/run3_int8_pdl_on.txt | grep -v Warning | cut -c1-160
