#!/usr/bin/env bash
# round 18 call A: the stream-K sweep of gate_up / down at M = 128 / 256 (both kinds), installed on the
# device's copy; the MLP with the table before and after, in turns; the stream-K GPU tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" >> $OUT/device.txt
cp fused_quant/kernels/small_m_gemm_configs.json /tmp/old_table.json
timeout 290 python3 -m benchmarks.sweep_small_m_gemm --out $OUT/sweep --kinds int8,fp8 --shapes gate_up,down --ms 256,128 > $OUT/sweep.txt 2>&1; echo "sweep rc $?" >> $OUT/rcs.txt
python3 -c "from pathlib import Path; from benchmarks.sweep_small_m_gemm import install; install(Path('$OUT/sweep/small_m_gemm_configs.json'))"; echo "install rc $?" >> $OUT/rcs.txt
timeout 100 python3 .scratch/ab18.py /tmp/old_table.json > $OUT/ab18.txt 2>&1; echo "ab18 rc $?" >> $OUT/rcs.txt
FUSED_QUANT_BACKEND=triton_fp8 timeout 120 python3 -m pytest -q -m "gpu" tests/kernels/test_small_m_gemm.py -k "stream_k or split_k or replay or case12 or case13 or case14" -rf > $OUT/tests_sk.txt 2>&1; echo "tests rc $?" >> $OUT/rcs.txt
cp fused_quant/kernels/small_m_gemm_configs.json $OUT/new_table.json
cat $OUT/device.txt $OUT/rcs.txt; grep -E "^(int8|fp8 )" $OUT/sweep.txt | cut -c1-260; grep -v "^raw" $OUT/ab18.txt | tail -n 6; tail -n 4 $OUT/tests_sk.txt
