#!/usr/bin/env bash
# thirty-second round, run 1 (planned, not run yet): the whole GPU matrix on the final tree in one device call, side by
# side (ci/gpu_suite.sh tests-parallel: probe, lean import, the three selftests, the triton_fp8 row with
# test_small_m_gemm.py's GPU ids in four parts, the torch and hip_w8a8 rows), then its logs and summary
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
FINAL=$OUT
git log -1 --format=%H > $FINAL/run1_commit.txt 2>/dev/null; git status --short | head >> $FINAL/run1_commit.txt
OUT=/tmp/suite T=${T:-450} bash ci/gpu_suite.sh tests-parallel; echo "gpu_suite rc $?" >> $FINAL/run1_commit.txt
tar czf $FINAL/run1_suite.tgz -C /tmp suite
cp /tmp/suite/summary.txt $FINAL/run1_suite_summary.txt
