#!/usr/bin/env bash
# fifty-second round, run 5, in the device time left (~55 s after a start): the transformers GPU tests on
# c4c3f07's package (the experts entries, from_pretrained's per-linear output dtype), the .whl wheels carried
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
PYTHONPATH=$PWD:/tmp/site timeout 45 python3 -m pytest -q -p no:cacheprovider tests/integrations/test_transformers_gpu.py \
  2>&1 | tail -5
