"""GPU rows of hip_w8a8 forced on CUDA: the fork's MLP pattern end to end, and the vendor GEMM
reached through the checked entry (a fake vendor module stands in for hipBLASLt)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch import nn

import fused_quant as fq
from fused_quant import keys as K
from fused_quant.reference import act_quant_ref
from fused_quant.validation import ShapeMismatchError
from tests.backends.test_hip_w8a8 import fake_vendor  # noqa: F401  (fixture)
from tests.helpers import assert_bits_equal, assert_gemm_close

pytestmark = [pytest.mark.gpu, pytest.mark.hip_w8a8]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("numerics", ["default", "hcu"])
def test_hcu_mlp_pattern_end_to_end(numerics, backend_env):
    backend_env("hip_w8a8")
    spec = importlib.util.spec_from_file_location("hcu_mlp", ROOT / "examples" / "hcu_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    mlp = mod.HcuMLP(512, 1024, numerics).to("cuda", torch.bfloat16)
    x = torch.randn(48, 512, device="cuda", dtype=torch.bfloat16)
    gate_up = mlp.gate_up_proj(x)
    xq, xs = mlp.act_fn(gate_up)
    q, s = act_quant_ref("silu_and_mul", gate_up, K.kInt8DynamicTokenSym, numerics=numerics)
    assert_bits_equal(xq, q, "fused silu_mul_quant")
    assert_bits_equal(xs, s, "per-token scales")
    out = mlp(x)
    assert_gemm_close(out, xq, xs, mlp.down_proj.weight, mlp.down_proj.weight_scale, exact_acc=True)
    if numerics == "default":
        assert_bits_equal(out, mlp.unfused(x), "fused vs unfused MLP")


def test_vendor_gemm_is_first_and_checked(fake_vendor, backend_env):  # noqa: F811
    backend_env("hip_w8a8")
    fake = fake_vendor()
    layer = fq.QuantLinear.from_float(nn.Linear(256, 128).to(torch.bfloat16), K.kInt8DynamicTokenSym,
                                      name="down_proj").to("cuda")
    x = torch.randn(33, 256, device="cuda", dtype=torch.bfloat16)
    qa = fq.fused_act_quant("identity", x, K.kInt8DynamicTokenSym)
    out = layer(qa)
    assert len(fake.calls) == 1 and fake.calls[0][4:] == (33, 128, 256, "NT")
    assert_gemm_close(out, qa.data, qa.scale, layer.weight, layer.weight_scale, layer.bias, exact_acc=True)
    gate_up = torch.randn(33, 512, device="cuda", dtype=torch.bfloat16)
    bad = fq.fused_act_quant("identity", gate_up, K.kInt8DynamicTokenSym)
    with pytest.raises(ShapeMismatchError, match="down_proj.*expected K=256.*received K=512"):
        layer(gate_up, x_and_scale_quanted=(bad.data, bad.scale))
    assert len(fake.calls) == 1, "the wrong-K call reached the vendor GEMM"
