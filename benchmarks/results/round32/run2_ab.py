"""Round 32, run 2 (planned): round 31 run 4's A/B (``round31/run4_ab.py``, run as it is) on a tree with
``gemm_launch.quantizing_config``, which its "on" variant turns off, so that "on" is again the table's one-token row,
"wide" the 2-token row and "off" no quantizing call. Arguments as run4_ab.py's."""
import contextlib
import importlib.util
from pathlib import Path

from fused_quant.kernels import gemm_launch as g

_spec = importlib.util.spec_from_file_location("run4_ab", Path(__file__).parents[1] / "round31" / "run4_ab.py")
run4_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run4_ab)
_rule = run4_ab.rule


@contextlib.contextmanager
def rule(mode: str, captured: bool = False):
    saved = g.quantizing_config
    if mode == "on":
        g.quantizing_config = lambda p, cfg, arch: cfg  # the table's own row, as before quantizing_config
    try:
        with _rule(mode, captured):
            yield
    finally:
        g.quantizing_config = saved


run4_ab.rule = rule  # what run4_ab.built binds under

if __name__ == "__main__":
    run4_ab.main()
