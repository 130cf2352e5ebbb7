#!/usr/bin/env bash
# Wheels the GPU rows need on a GPU node without a package index: the tested
# transformers / compressed-tensors and what they need beyond such a node's image, for CPython 3.12
# x86-64, into .whl/ (ignored). ci/gpu_suite.sh installs them into /tmp/site when .whl/ is there.
set -eu -o pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl -r ci/gpu_wheels.txt
ls .whl
