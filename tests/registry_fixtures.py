"""Shared by the producer-registry tests (test_registry*.py): the activation modules, a fake backend,
inputs with adversarial rows and the bitwise checks against ``act_quant_ref`` / the plain activation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant import runtime
from fused_quant import registry
from fused_quant.selection import BACKENDS
from fused_quant.selection import Backend
from fused_quant.contract import QuantizedActivation
from fused_quant.modules import ReLUSquared, SiluAndMul
from fused_quant.reference import act_quant_ref
from tests.helpers import adversarial_rows, assert_bits_equal

ACT_MODULES = {"silu_and_mul": SiluAndMul, "relu2": ReLUSquared, "identity": nn.Identity}
TEST_BACKEND = "test_backend"


@pytest.fixture
def fake_backend(monkeypatch):
    """A backend named TEST_BACKEND, selected as current, with an empty producer table; the real
    table, backend list and selection are restored afterwards."""
    from fused_quant import selection

    monkeypatch.setattr(registry, "_PRODUCERS", {**registry._PRODUCERS, TEST_BACKEND: {}})
    monkeypatch.setitem(BACKENDS, TEST_BACKEND, Backend(TEST_BACKEND, "test", "tests", "any device",
                                                        any_device=True, modules=()))
    monkeypatch.setattr(selection, "_loaded", set(selection._loaded) | {TEST_BACKEND})
    monkeypatch.setattr(registry, "current_backend_name", lambda: TEST_BACKEND)
    monkeypatch.setattr(registry, "_CALLS", runtime.Cache("calls"))  # validated calls of this test only
    return TEST_BACKEND


def _input(act: str, dtype=torch.bfloat16, shape=(16, 64), seed=0) -> torch.Tensor:
    """Random rows; the first ones replaced by adversarial rows (zeros, NaN, Inf, denormals, max)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 4).to(dtype)
    rows = x.view(-1, shape[-1])
    n = min(len(rows), 8)
    rows[:n] = adversarial_rows(shape[-1], dtype, seed=seed)[:n]
    return x


def _assert_qa_is_ref(qa, act: str, x: torch.Tensor, key: K.QuantKey, scale, numerics="default"):
    assert isinstance(qa, QuantizedActivation), type(qa)
    q, s = act_quant_ref(act, x, key, scale, numerics=numerics, fp8_dtype=registry.platform_fp8_dtype())
    assert_bits_equal(qa.data, q, f"{act}->{K.key_name(key)} q")
    assert_bits_equal(qa.scale, s, f"{act}->{K.key_name(key)} scale")
    assert qa.quant_key == K.normalize_key(key)
    assert qa.orig_dtype == x.dtype and qa.orig_shape == q.shape
    if K.is_static(key):
        assert qa.scale is scale  # the consumer's tensor itself


def _assert_plain(y, act_fn, x):
    assert type(y) is torch.Tensor, type(y)
    assert_bits_equal(y, act_fn(x), "plain activation")
