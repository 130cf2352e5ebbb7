"""examples/transformers_w8a8.py runs as written (a subprocess: its own imports and output) and fuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

pytestmark = [pytest.mark.transformers]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("targets", ["mlp", "all"])
def test_example_runs_fuses_and_round_trips(tmp_path, targets):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))), "FUSED_QUANT_BACKEND": "torch"}
    proc = subprocess.run([sys.executable, "examples/transformers_w8a8.py", "--out", str(tmp_path / "ckpt"),
                           "--targets", targets], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "2 fused" in proc.stdout and "('torch', 'silu_and_mul', 'int8_dynamic_token')" in proc.stdout
    assert "same tokens" in proc.stdout
    assert (tmp_path / "ckpt" / "model.safetensors").exists()
