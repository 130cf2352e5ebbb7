#!/usr/bin/env bash
# fifty-fourth round, run 3 (the same machine, warm; 380 s of device time were left after it): the hip_w8a8 row of
# the GPU matrix (forced on CUDA), for the ROCm seams' change (b98ba81), stopping at the first failure
mkdir -p $OUT/r && (SECONDS=0; FUSED_QUANT_BACKEND=hip_w8a8 PYTHONPATH=$PWD timeout 380 python3 -m pytest -q \
  -p no:cacheprovider -x -m hip_w8a8 tests > $OUT/r/hip_w8a8_row.txt 2>&1; echo "hip_w8a8 row rc $? in ${SECONDS} s" \
  | tee $OUT/r/rc.txt); tail -n 3 $OUT/r/hip_w8a8_row.txt | cut -c1-200
