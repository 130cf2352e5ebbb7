"""GPU rows of the transformers integration (H200: ``triton_fp8``, and ``hip_w8a8`` forced on CUDA):
models built from small configs on CUDA, quantized with the backend's producers and GEMMs.

Per backend x architecture (a SiLU and a relu2 MLP) x dynamic key: every MLP fused, one producer
call per MLP per forward from the backend itself, fused logits bitwise equal to unfused; against the
float model teacher-forced top-1 agreement wherever its margin is clear; ``generate``'s first token
is the forward's argmax. The tiny_llama checkpoint loads onto CUDA within 0.5 bf16 steps per layer
against float64 and saves and reloads bitwise; a compiled MLP (fullgraph) is bitwise eager.
The device has no transformers of the tested range unless one is carried (``ci/gpu_wheels.sh``).
"""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

import fused_quant as fq  # noqa: E402
from fused_quant import keys as K  # noqa: E402
from fused_quant.integrations import transformers as fqt  # noqa: E402
from tests.integrations.test_transformers import (  # noqa: E402
    act_of, assert_top1_where_the_margin_is_clear, logits, make_model, mlp_count, token_ids)
from tests.integrations.tiny_llama import LAYERS, layer_errors, write_tiny_llama  # noqa: E402

_ok, _why = fqt.check_versions()
if not _ok:
    pytest.skip(_why, allow_module_level=True)

pytestmark = [pytest.mark.transformers, pytest.mark.gpu]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CUDA = torch.device("cuda")
BACKENDS = [pytest.param("triton_fp8", marks=pytest.mark.triton_fp8),
            pytest.param("hip_w8a8", marks=pytest.mark.hip_w8a8)]
KEYS = ["int8_dynamic_token", "fp8_dynamic_token"]
ARCHS = ["llama", "nemotron"]  # SiluAndMul and relu2 producers


def cuda_model(arch: str, dtype: torch.dtype, seed: int = 0) -> nn.Module:
    return make_model(arch, dtype, seed).to(CUDA)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_gpu_every_mlp_fused_by_the_backend_and_bitwise_unfused(backend, arch, key, backend_env):
    backend_env(backend)
    fused, unfused = cuda_model(arch, torch.bfloat16), cuda_model(arch, torch.bfloat16)
    report = fqt.quantize_model(fused, key)
    assert report.fused and not report.unfused and not report.skipped
    assert fqt.quantize_model(unfused, key, fuse=False).unfused
    ids = token_ids().to(CUDA)
    fq.reset_fusion_counts()
    a = logits(fused, ids)
    counts = fq.fusion_counts()
    n = mlp_count(fused)
    assert counts == {(backend, act_of(arch), key): n, (backend, "identity", key): n}, counts
    b = logits(unfused, ids)
    assert a.is_cuda and torch.equal(a, b)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_gpu_teacher_forced_top1_matches_the_float_model_where_the_margin_is_clear(backend, arch, key, backend_env):
    backend_env(backend)
    model = cuda_model(arch, torch.float32)
    ids = token_ids(4, 16).to(CUDA)
    ref = logits(model, ids)
    fqt.quantize_model(model, key)
    assert_top1_where_the_margin_is_clear(logits(model, ids), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_gpu_generate_starts_with_the_forward_argmax(backend, arch, dtype, backend_env):
    backend_env(backend)
    model = cuda_model(arch, dtype)
    fqt.quantize_model(model)
    ids = token_ids(1, 7, seed=2).to(CUDA)
    first = logits(model, ids)[0, -1].argmax()
    fq.reset_fusion_counts()
    new = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False,
                         pad_token_id=0)[0, ids.shape[1]:]
    assert new.shape == (5,) and new[0] == first
    assert fq.fusion_counts()[(backend, act_of(arch), "int8_dynamic_token")] == 5 * mlp_count(model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpu_tiny_llama_loads_within_half_a_bf16_step_and_round_trips(backend, backend_env, tmp_path):
    backend_env(backend)
    tiny = write_tiny_llama(tmp_path / "w8a8")
    model = fqt.from_pretrained(tiny, device=CUDA)
    assert all(b.is_cuda for b in model.buffers()) and len(model.fused_quant_report.fused) == LAYERS
    errors = layer_errors(model, str(tiny / "model.safetensors"))
    assert len(errors) == 2 * LAYERS and max(errors.values()) <= 0.5, errors
    fqt.save_pretrained(model, tmp_path / "saved")
    again = fqt.from_pretrained(tmp_path / "saved", device=CUDA)
    ids = token_ids(2, 9).to(CUDA)
    fq.reset_fusion_counts()
    assert torch.equal(logits(again, ids), logits(model, ids))
    assert fq.fusion_counts()[(backend, "silu_and_mul", "int8_dynamic_token")] == 2 * LAYERS


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_gpu_compiled_mlp_bitwise_equal_to_eager(backend, arch, backend_env):
    import torch._dynamo

    backend_env(backend)
    torch._dynamo.reset()
    model = cuda_model(arch, torch.bfloat16)
    fqt.quantize_model(model, K.kFp8DynamicTokenSym)
    mlp = next(m for m in model.modules() if isinstance(m, (fqt.QuantGatedMLP, fqt.QuantMLP)))
    compiled = torch.compile(mlp, fullgraph=True)
    with torch.no_grad():
        for m in (1, 5, 16):
            x = torch.randn(m, 64, device=CUDA, dtype=torch.bfloat16)
            assert torch.equal(compiled(x), mlp(x))
