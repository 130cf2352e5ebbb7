#!/usr/bin/env bash
# thirty-first round, run 5: quantizing_config (int8 per-token quantizing calls at one token in the table's 2-token
# MMA row) on the GPU: the new bits test at gate_up's shape, and test_decode_gpu.py's int8 per-token ids on both
# backends (eager vs captured and compiled replays, bitwise)
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git status --short | grep -v "^?? benchmarks/results" | head
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_small_m_gemm.py -k "one_token_rows_bits or 2_token_row" 2>&1 | tail -n 3
timeout 130 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_decode_gpu.py -k "int8_dynamic_token" 2>&1 | tail -n 3
