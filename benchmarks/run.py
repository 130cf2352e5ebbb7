"""Run the benchmarks from a checkout: ``python benchmarks/run.py [act_quant|mlp|all] [--quick]``."""

import sys

from fused_quant.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
