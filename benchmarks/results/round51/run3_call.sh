#!/usr/bin/env bash
# fifty-first round, run 3 (an H100): a search (not a retime) of the small-M table's FP8 down and gate_up rows at 16 tokens
# as this GPU model's own rows, bench mlp at 1 and 16 tokens before and after they are installed (A, B, A, B)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=$OUT/run3; mkdir -p $R
cp fused_quant/kernels/small_m_gemm_configs.json /tmp/table_before.json
timeout 300 python3 -m benchmarks.sweep_small_m_gemm --out $R/sweep --kinds fp8 --shapes down,gate_up --ms 16 \
  --own-rows > $R/sweep.txt 2>&1; echo "sweep rc $?"
grep -E "^fp8" $R/sweep.txt | cut -c1-200
python3 - $R/sweep/small_m_gemm_configs.json <<'PY'
import json, sys
new = json.load(open(sys.argv[1]))["rows"]
old = {(r["kind"], r["shape"], r["m"], r.get("device")): r for r in json.load(open("/tmp/table_before.json"))["rows"]}
F = ("BLOCK_N", "BLOCK_M", "BLOCK_K", "splits", "num_warps", "num_stages")
for r in new:
    o = old.get((r["kind"], r["shape"], r["m"], r.get("device")))
    print(r["shape"], r["m"], "new", {f: r[f] for f in F}, r["us"], "| installed", o and {f: o[f] for f in F}, o and o["us"])
PY
for turn in A1 B1 A2 B2; do
  if [ "${turn:0:1}" = B ]; then python3 -c "
import sys; sys.path.insert(0, '.')
from benchmarks.sweep_small_m_gemm import install
print(install(__import__('pathlib').Path('$R/sweep/small_m_gemm_configs.json')))" > $R/install_$turn.txt 2>&1
  else cp /tmp/table_before.json fused_quant/kernels/small_m_gemm_configs.json; fi
  timeout 60 python3 -m fused_quant bench mlp --m 1,16 --out $R/mlp_$turn > $R/mlp_$turn.txt 2>&1; echo "mlp $turn rc $?"
  grep "^mlp M=" $R/mlp_$turn.txt | cut -c1-260
done
cp fused_quant/kernels/small_m_gemm_configs.json $R/table_after.json
