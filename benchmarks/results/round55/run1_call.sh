#!/usr/bin/env bash
# fifty-fifth round, run 1 (written at the end of the fifty-fourth round, not yet run): the H100's int8 qkv row at
# 160 tokens (N = 6144, K = 4096), a near tie between the small-M kernel and the Triton int8 GEMM (swept 17.82
# against 18.02 us; the fifty-third round's start read 1.009x, the fifty-fourth's 0.951x and 0.936x). Five retimes of
# that one row, each a process of its own (sweep_small_m_gemm --retime --own-rows). The rule, set before the run: only
# if all five time the Triton int8 GEMM faster than the small-M kernel is the fifth's row installed (the chain then
# takes the Triton GEMM there, as a row slower than its peer is not taken); else nothing is installed. bench gemm
# then runs on the table as it is (the report's "never slower" lines over it). On an H200 the decode benches run
# instead (round 50's run1_call.sh).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash benchmarks/results/round50/run1_call.sh
  exit
fi
SECONDS=0
R=/tmp/run1; rm -rf $R; mkdir -p $R
for i in 1 2 3 4 5; do
  timeout 90 python3 -m benchmarks.sweep_small_m_gemm --retime --own-rows --kinds int8 --shapes qkv --ms 160 \
    --out $R/rt$i > $R/rt$i.txt 2>&1
  echo "retime $i rc $? at ${SECONDS} s" | tee -a $R/rcs.txt
done
python3 - <<'PY' | tee $R/decision.txt
import json, pathlib
R = pathlib.Path("/tmp/run1")
faster = []
for i in range(1, 6):
    p = R / f"rt{i}" / "small_m_gemm_configs.json"
    rows = json.loads(p.read_text())["rows"] if p.is_file() else []
    t = rows[0]["torch_all"] if len(rows) == 1 else {}
    print(f"retime {i}: ours {rows[0]['us'] if rows else None}  triton_int8 {t.get('triton_int8')}")
    faster.append(bool(t) and t["triton_int8"] < rows[0]["us"])
if all(faster):
    from benchmarks.sweep_small_m_gemm import install
    print("all five: the Triton int8 GEMM faster; installed retime 5's row:", install(R / "rt5" / "small_m_gemm_configs.json"))
else:
    print("not all five time the Triton int8 GEMM faster: nothing installed")
PY
cp fused_quant/kernels/small_m_gemm_configs.json $R/installed_table.json
timeout 120 python3 -m fused_quant bench gemm --out $R/gemm > $R/bench_gemm.txt 2>&1
echo "bench gemm rc $? at ${SECONDS} s" | tee -a $R/rcs.txt
python3 -m benchmarks.report $R/gemm/gemm.json > $R/report.txt 2>&1; echo "report rc $?" | tee -a $R/rcs.txt
tar czf $OUT/run1.tgz -C /tmp run1
grep "qkv     M= 128\|qkv     M= 160\|qkv     M= 192" $R/bench_gemm.txt | grep int8 | cut -c1-220
grep "never slower" $R/report.txt | cut -c1-260
