"""``python -m fused_quant`` is the ``fused-quant`` command."""

import sys

from fused_quant.cli import main

sys.exit(main())
