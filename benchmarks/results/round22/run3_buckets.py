"""Round 22, run 3: the one-launch producing GEMM at token buckets outside ``PRODUCING_BUCKETS`` (32, 160, 192,
256): run 1's A/B script (``MS``) or run 2's profile (``PROFILE=1``) with every bucket allowed."""

import os
import runpy
import sys

sys.path.insert(0, os.getcwd())
from fused_quant.kernels import gemm_launch  # noqa: E402

gemm_launch.PRODUCING_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 160, 192, 256)
here = os.path.dirname(os.path.abspath(__file__))
script = "run2_profile.py" if os.environ.get("PROFILE") else "run1_producing_ab.py"
runpy.run_path(os.path.join(here, script), run_name="__main__")
