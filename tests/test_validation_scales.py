"""Error paths of static and dynamic activation scales: passed per call to ``fused_act_quant``
(metadata checked on every call) and set on a layer (values checked once, at set time). Split
from test_validation.py; shared helpers in tests/validation_fixtures.py.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant.modules import QuantLinear
from fused_quant.registry import fused_act_quant
from fused_quant.validation import (
    DeviceMismatchError,
    QuantDTypeError,
    ScaleError,
)
from tests.validation_fixtures import _layer

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]

STATIC_KEYS = {n: k for n, k in K.KEYS.items() if K.is_static(k)}
DYNAMIC_KEYS = {n: k for n, k in K.KEYS.items() if not K.is_static(k)}


# --- static scales passed per call (fused_act_quant) ------------------------------------------


@pytest.mark.parametrize("key_name", list(STATIC_KEYS))
def test_static_scale_metadata(key_name):
    key = K.KEYS[key_name]
    x = torch.randn(4, 8)
    with pytest.raises(QuantDTypeError) as exc:
        fused_act_quant("relu2", x, key, torch.tensor([0.5], dtype=torch.float16))
    assert "float32" in str(exc.value) and "torch.float16" in str(exc.value) and key_name in str(exc.value)
    with pytest.raises(ScaleError) as exc:
        fused_act_quant("relu2", x, key, torch.ones(4))  # a per-token-sized scale for a per-tensor key
    assert "exactly 1 element" in str(exc.value) and "got 4" in str(exc.value)
    with pytest.raises(DeviceMismatchError) as exc:
        fused_act_quant("relu2", x, key, torch.ones(1, device="meta"))
    assert "on meta" in str(exc.value) and "expected cpu" in str(exc.value)
    # FusedQuantErrors, as every input check raises: a missing scale a ScaleError, a float a QuantDTypeError
    with pytest.raises(ScaleError, match="one-element float32 torch.Tensor on cpu, got NoneType .a static key"):
        fused_act_quant("relu2", x, key)  # static key, no scale
    hint = r"e.g. torch.tensor\(\[0.5\], dtype=torch.float32, device='cpu'\)"
    with pytest.raises(QuantDTypeError, match=r"got float; " + hint):
        fused_act_quant("relu2", x, key, 0.5)
    np = pytest.importorskip("numpy")
    for number in (np.float64(0.5), np.float32(0.5), np.int64(1)):  # numpy numbers: the same hint, as a float
        with pytest.raises(QuantDTypeError, match=hint if number != 1 else r"e.g. torch.tensor\(\[1.0\]"):
            fused_act_quant("relu2", x, key, number)
    with pytest.raises(QuantDTypeError, match=r"got bool$"):  # no hint for a bool
        fused_act_quant("relu2", x, key, True)


@pytest.mark.parametrize("key_name", list(DYNAMIC_KEYS))
def test_dynamic_key_given_a_scale(key_name):
    with pytest.raises(ScaleError) as exc:
        fused_act_quant("relu2", torch.randn(4, 8), K.KEYS[key_name], torch.ones(1))
    assert key_name in str(exc.value) and "scale=None" in str(exc.value)


# --- static scales set on a layer (checked once) ----------------------------------------------


BAD_VALUES = (0.0, -1.0, float("inf"), float("nan"), -0.0, float("-inf"))


@pytest.mark.parametrize("as_tensor", (False, True), ids=("float", "tensor"))
@pytest.mark.parametrize("value", BAD_VALUES, ids=str)
@pytest.mark.parametrize("key_name", list(STATIC_KEYS))
def test_bad_static_scale_value_at_set_time(key_name, value, as_tensor):
    key = K.KEYS[key_name]
    scale = torch.tensor([value], dtype=torch.float32) if as_tensor else value
    lin = nn.Linear(16, 8)
    with pytest.raises(ScaleError) as exc:
        QuantLinear.from_float(lin, key, input_scale=scale, name="blk.0.o_proj")
    msg = str(exc.value)
    assert msg.startswith("blk.0.o_proj:") and "finite and >= 1.1754944e-38" in msg and f"got {value!r}" in msg, msg
    layer = QuantLinear.from_float(lin, key, input_scale=0.5, name="blk.0.o_proj")
    with pytest.raises(ScaleError, match=re.escape(f"got {value!r}")):
        layer.set_input_scale(scale)
    assert layer.input_scale.item() == 0.5  # a rejected scale leaves the old one in place


def test_static_scale_metadata_at_set_time():
    layer = _layer(K.kFp8StaticTensorSym)
    with pytest.raises(QuantDTypeError, match=r"input_scale must be float32, got torch.float64"):
        layer.set_input_scale(torch.tensor([0.5], dtype=torch.float64))
    with pytest.raises(ScaleError, match=r"exactly 1 element, got 2"):
        layer.set_input_scale(torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("key_name", list(STATIC_KEYS))
def test_static_key_without_input_scale(key_name):
    with pytest.raises(ScaleError) as exc:
        QuantLinear.from_float(nn.Linear(16, 8), K.KEYS[key_name], name="blk.1.down")
    assert str(exc.value) == f"blk.1.down: static key {key_name} needs input_scale"


@pytest.mark.parametrize("key_name", list(DYNAMIC_KEYS))
def test_dynamic_key_with_input_scale(key_name):
    with pytest.raises(ScaleError, match=f"{key_name} computes its scale per token; input_scale must be None"):
        QuantLinear.from_float(nn.Linear(16, 8), K.KEYS[key_name], input_scale=0.5)
