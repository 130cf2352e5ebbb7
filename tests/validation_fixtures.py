"""Shared by the error-path tests (test_validation*.py): a checked layer and a quantized activation."""

from __future__ import annotations

import torch
from torch import nn

from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.modules import QuantLinear
from fused_quant.registry import fused_act_quant


def _scale(key: K.QuantKey) -> torch.Tensor | None:
    return torch.tensor([0.05], dtype=torch.float32) if K.is_static(key) else None


def _layer(key=K.kInt8DynamicTokenSym, k=16, n=8, name="model.layers.3.mlp.down_proj", bias=False,
           dtype=torch.bfloat16) -> QuantLinear:
    torch.manual_seed(0)
    lin = nn.Linear(k, n, bias=bias).to(dtype)
    return QuantLinear.from_float(lin, key, _scale(key), name=name)


def _qa(m: int, k: int, key=K.kInt8DynamicTokenSym) -> QuantizedActivation:
    x = torch.randn(m, k, dtype=torch.bfloat16)
    return fused_act_quant("identity", x, key, _scale(key))
