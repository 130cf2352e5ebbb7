"""Run the benchmarks from the checkout root: ``python -m benchmarks.run [act_quant|mlp|all] [--quick]
[--out DIR] [--force]``, the same as ``fused-quant bench`` with those arguments."""

import sys

from fused_quant.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
