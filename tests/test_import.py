"""Importing fused_quant is lean: no triton, no vllm, no Dynamo, CUDA untouched, < 150 ms on top
of torch. Measured in fresh interpreters, or it proves nothing."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys, time
import torch
t0 = time.perf_counter()
import fused_quant
dt = time.perf_counter() - t0
print(json.dumps({"ms": dt * 1e3, "triton": "triton" in sys.modules, "vllm": "vllm" in sys.modules,
                  "dynamo": "torch._dynamo" in sys.modules, "cuda_init": torch.cuda.is_initialized(),
                  "threads": __import__("threading").active_count()}))
"""


def _run() -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "FUSED_QUANT_BACKEND": "triton_fp8"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_is_lean():
    # FUSED_QUANT_BACKEND names a backend that cannot run here: import must not read it
    r = _run()
    assert not r["triton"], "import fused_quant imported triton"
    assert not r["vllm"], "import fused_quant imported vllm"
    assert not r["dynamo"], "import fused_quant imported torch._dynamo"
    assert not r["cuda_init"], "import fused_quant initialized CUDA"
    assert r["threads"] == 1, "import fused_quant started a thread"


def test_import_cost_under_150_ms():
    best = min(_run()["ms"] for _ in range(3))
    assert best < 150, f"import fused_quant took {best:.0f} ms on top of import torch"
