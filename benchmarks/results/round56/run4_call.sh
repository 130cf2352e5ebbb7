#!/usr/bin/env bash
# fifty-sixth round, run 4: the commits after run 1's tree (1eedf6b) on a GPU: bench mlp with the sustained
# replays' blocks no longer held (9dc2dcc), probe and selftest through the moved FUSED_QUANT_DISABLED_GEMMS warning
# (3d6d7ec; a misspelt name set for them), and the decode GPU tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
SECONDS=0
R=/tmp/run4; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $R/device.txt
cat $R/device.txt
save() { echo "$1 at ${SECONDS} s" >> $R/rcs.txt; tar czf $OUT/run4.tgz -C /tmp run4; }
timeout 200 python3 -m fused_quant bench mlp --out $R/mlp > $R/bench_mlp.txt 2>&1; save "bench mlp rc $?"
FUSED_QUANT_DISABLED_GEMMS=scaled_mm_fp9 python3 -m fused_quant probe > $R/probe.txt 2>&1; save "probe rc $?"
FUSED_QUANT_DISABLED_GEMMS=scaled_mm_fp9 python3 -m fused_quant selftest > $R/selftest.txt 2>&1; save "selftest rc $?"
timeout 150 env FUSED_QUANT_BACKEND=triton_fp8 python3 -m pytest -q -p no:logging -rf \
  -m "triton_fp8 or (gpu and not hip_w8a8)" tests/gpu/test_decode_gpu.py > $R/decode.txt 2>&1; save "decode rc $?"
cat $R/rcs.txt; tail -n 2 $R/decode.txt; grep -i "warning" $R/probe.txt $R/selftest.txt | cut -c1-200
grep "^mlp M=" $R/bench_mlp.txt | sed 's/SQNR.*//' | cut -c1-330
