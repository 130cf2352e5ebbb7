"""The seed scenarios of the design, end to end on the torch backend.

(a) HCU-style MLP: gate_up -> maybe_fused_act_quant(SiluAndMul) -> down(placeholder,
    x_and_scale_quanted=(xq, xs)); and vLLM's ReLU^2 -> static FP8 MLP.
(b) the placeholder bug: a [m, 2H] tensor reaching a [N, H] GEMM is stopped with a named error
    before any provider (here a stand-in for hipblaslt_w8a8_gemm) is called.
(c) a LoRA-like consumer opts out and receives the plain activation.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.gemm import dequant_epilogue, quant_gemm, register_gemm_provider, unregister_gemm_provider
from fused_quant.modules import QuantLinear, ReLUSquared, SiluAndMul, name_quant_linears
from fused_quant.reference import act_quant_ref
from fused_quant.registry import fusion_counts, maybe_fused_act_quant, platform_fp8_dtype, reset_fusion_counts
from fused_quant.validation import ShapeMismatchError
from tests.helpers import assert_gemm_close, adversarial_rows, assert_bits_equal

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]

# hidden 48, intermediate H = 80: gate_up is [2H = 160, 48], down is [48, H = 80]
HIDDEN, H = 48, 80
DOWN_KEYS = list(K.KEYS)  # the HCU path is int8 per token; the others are the same scenario on other nodes
TOKEN_SHAPES = {"decode": (1,), "prefill": (37,), "batched": (3, 5), "empty": (0,)}  # empty: M = 0


class MLP(nn.Module):
    """A model's MLP as the Hygon fork writes it, calling maybe_fused_act_quant unconditionally."""

    def __init__(self, down_key: K.QuantKey, act: nn.Module | None = None, dtype=torch.bfloat16, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.act = act or SiluAndMul()
        up_width = 2 * H if isinstance(self.act, SiluAndMul) else H
        self.gate_up = QuantLinear.from_float(nn.Linear(HIDDEN, up_width).to(dtype), K.kInt8DynamicTokenSym)
        scale = 0.02 if K.is_static(down_key) else None
        self.down = QuantLinear.from_float(nn.Linear(H, HIDDEN).to(dtype), down_key, scale)
        name_quant_linears(self, prefix="model.layers.0.mlp")

    def forward(self, x: torch.Tensor, numerics: str | None = None) -> torch.Tensor:
        gate_up = self.gate_up(x)
        qa = maybe_fused_act_quant(self.act, gate_up, self.down, numerics=numerics)
        if isinstance(qa, QuantizedActivation):
            return self.down(gate_up, x_and_scale_quanted=(qa.data, qa.scale))
        return self.down(qa)

    def unfused(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.gate_up(x)))


def tokens(lead: tuple[int, ...], dtype=torch.bfloat16, seed=1) -> torch.Tensor:
    """Random hidden states; in the prefill/batched shapes (8 rows or more) up to half the rows are the adversarial
    ones (zero, one huge value, NaN, +-Inf, denormals, +-max, -0)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, HIDDEN, generator=g).to(dtype)
    rows = x.view(-1, HIDDEN)
    if len(rows) >= 8:
        n = min(len(rows) // 2, 10)
        rows[:n] = adversarial_rows(HIDDEN, dtype, seed=seed)[:n]
    return x


# --- (a) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("lead_id", list(TOKEN_SHAPES))
@pytest.mark.parametrize("down_key", DOWN_KEYS)
def test_hcu_mlp_default_profile_equals_the_unfused_path(down_key, lead_id):
    """The fused producer is bitwise the unfused chain quant(SiluAndMul()(x)) (docs/NUMERICS.md, profile
    "default"), and down's GEMM is then fed identical operands: the outputs are bitwise equal."""
    mlp = MLP(K.KEYS[down_key])
    x = tokens(TOKEN_SHAPES[lead_id])
    reset_fusion_counts()
    fused = mlp(x)
    # the fused path did run (gate_up's own input went through the identity producer)
    assert fusion_counts() == {("torch", "identity", "int8_dynamic_token"): 1, ("torch", "silu_and_mul", down_key): 1}
    assert fused.shape == (*TOKEN_SHAPES[lead_id], HIDDEN)
    assert_bits_equal(fused, mlp.unfused(x), f"fused vs unfused MLP ({down_key})")


@pytest.mark.parametrize("down_key", DOWN_KEYS)
def test_hcu_mlp_hcu_profile_equals_the_hcu_reference(down_key):
    """Profile "hcu" keeps silu*up in fp32: the fused output equals down fed with
    act_quant_ref(numerics="hcu"), and is within the float64 bound of those operands."""
    key = K.KEYS[down_key]
    mlp = MLP(key)
    x = tokens((3, 5))
    gate_up = mlp.gate_up(x)
    xq, xs = act_quant_ref("silu_and_mul", gate_up, key, mlp.down.input_scale, numerics="hcu",
                           fp8_dtype=platform_fp8_dtype())
    qa = maybe_fused_act_quant(SiluAndMul(), gate_up, mlp.down, numerics="hcu")
    assert_bits_equal(qa.data, xq, "hcu xq")
    assert_bits_equal(qa.scale, xs, "hcu xs")
    out = mlp(x, numerics="hcu")
    assert_bits_equal(out, mlp.down(gate_up, x_and_scale_quanted=(xq, xs)), "hcu MLP")
    assert_gemm_close(out, xq, xs, mlp.down.weight, mlp.down.weight_scale, mlp.down.bias,
                        exact_acc=not K.is_fp8(key))
    # the two profiles are different numerics: on these tokens at least one code differs
    q_default = maybe_fused_act_quant(SiluAndMul(), gate_up, mlp.down, numerics="default").data
    assert not torch.equal(q_default.view(torch.uint8), qa.data.view(torch.uint8))


@pytest.mark.parametrize("down_key", ["fp8_static_tensor", "int8_static_tensor"])
def test_relu2_static_mlp_equals_the_unfused_path(down_key):
    """vLLM's seed: ReLU^2 + static FP8 as one producer; down(QuantizedActivation) == unfused."""
    mlp = MLP(K.KEYS[down_key], act=ReLUSquared())
    x = tokens((29,))
    up = mlp.gate_up(x)
    qa = maybe_fused_act_quant(ReLUSquared(), up, mlp.down)
    assert isinstance(qa, QuantizedActivation) and qa.scale is mlp.down.input_scale
    assert_bits_equal(mlp.down(qa), mlp.unfused(x), "relu2 MLP")


# --- (b) ----------------------------------------------------------------------------------------


@pytest.fixture
def counting_provider():
    """A stand-in for hipblaslt_w8a8_gemm registered first for the torch backend; counts calls."""
    calls = []

    def hipblaslt_w8a8_gemm(xq, xs, w, ws, bias, out_dtype):
        calls.append((tuple(xq.shape), tuple(w.shape)))
        # the real kernel's own check, which the design keeps out of reach
        if xq.shape[-1] != w.shape[-1]:
            raise AssertionError("a.shape[-1] == b.shape[-1]")
        acc = xq.to(torch.float64) @ w.to(torch.float64).T
        return dequant_epilogue(acc, xs, ws, bias, out_dtype)

    register_gemm_provider("test_hipblaslt_w8a8_gemm", hipblaslt_w8a8_gemm, kind="int8", backends=("torch",))
    try:
        yield calls
    finally:
        unregister_gemm_provider("test_hipblaslt_w8a8_gemm")


def test_placeholder_cannot_reach_a_user_gemm_provider(counting_provider):
    mlp = MLP(K.kInt8DynamicTokenSym)
    m = 6
    x = tokens((m,))
    unfused = mlp.unfused(x)
    del counting_provider[:]
    gate_up = mlp.gate_up(x)  # [m, 2H]: the placeholder
    assert gate_up.shape == (m, 2 * H)
    n_before = len(counting_provider)  # gate_up's own GEMM went through the provider
    assert n_before == 1
    # the correct call reaches the provider (so the count below can tell)
    qa = maybe_fused_act_quant(SiluAndMul(), gate_up, mlp.down)
    good = mlp.down(gate_up, x_and_scale_quanted=(qa.data, qa.scale))
    assert len(counting_provider) == n_before + 1 and counting_provider[-1] == ((m, H), (HIDDEN, H))
    assert_bits_equal(good, unfused)

    # the mistake: a linear method that ignores x_and_scale_quanted quantizes the placeholder itself
    xq_bad, xs_bad = act_quant_ref("identity", gate_up, K.kInt8DynamicTokenSym)  # int8 [m, 2H]
    attempts = [
        lambda: mlp.down(gate_up, x_and_scale_quanted=(xq_bad, xs_bad)),
        lambda: mlp.down(gate_up),  # the placeholder as the plain input
        lambda: quant_gemm(QuantizedActivation(xq_bad, xs_bad, torch.bfloat16, xq_bad.shape, K.kInt8DynamicTokenSym),
                           mlp.down.weight, mlp.down.weight_scale, mlp.down.bias, out_dtype=torch.bfloat16,
                           layer=mlp.down.name),
    ]
    for attempt in attempts:
        with pytest.raises(ShapeMismatchError) as exc:
            attempt()
        err, msg = exc.value, str(exc.value)
        assert err.layer == "model.layers.0.mlp.down" and msg.startswith("model.layers.0.mlp.down:"), msg
        assert f"expected K={H}" in msg and f"received K={2 * H}" in msg and "placeholder" in msg, msg
        assert (err.m, err.n, err.k) == (m, HIDDEN, H)
        assert err.x_shape == (m, 2 * H) and err.w_shape == (HIDDEN, H)
    assert len(counting_provider) == n_before + 1, "a wrong-K operand reached the GEMM provider"


def test_wrong_token_count_cannot_reach_a_user_gemm_provider(counting_provider):
    """xq from another batch (other token count than the placeholder) is stopped as well."""
    mlp = MLP(K.kInt8DynamicTokenSym)
    gate_up = mlp.gate_up(tokens((6,)))
    other = maybe_fused_act_quant(SiluAndMul(), mlp.gate_up(tokens((4,))), mlp.down)
    n_before = len(counting_provider)
    with pytest.raises(ShapeMismatchError, match=r"token-count mismatch: placeholder x has shape \(6, 160\)"):
        mlp.down(gate_up, x_and_scale_quanted=(other.data, other.scale))
    with pytest.raises(ShapeMismatchError, match="with 4 rows"):
        mlp.down(None, x_and_scale_quanted=(other.data, torch.ones(6, 1)))
    assert len(counting_provider) == n_before


# --- (c) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("down_key", DOWN_KEYS)
def test_lora_like_consumer_receives_the_plain_activation(down_key):
    mlp = MLP(K.KEYS[down_key])
    mlp.down.requires_unquantized_input = True  # e.g. a LoRA adapter needs the raw activation
    x = tokens((3, 5))
    gate_up = mlp.gate_up(x)
    reset_fusion_counts()
    act = maybe_fused_act_quant(SiluAndMul(), gate_up, mlp.down)
    assert type(act) is torch.Tensor and not isinstance(act, QuantizedActivation)
    assert_bits_equal(act, SiluAndMul()(gate_up), "plain activation")
    assert fusion_counts() == {}
    out = mlp(x)  # the model's own forward takes the plain branch
    assert_bits_equal(out, mlp.unfused(x), "LoRA-like MLP vs unfused")
    # and the adapter can add its low-rank term to the plain activation
    lora_a = torch.randn(H, 4, dtype=torch.bfloat16) * 0.01
    lora_b = torch.randn(4, HIDDEN, dtype=torch.bfloat16) * 0.01
    with_lora = mlp.down(act) + act @ lora_a @ lora_b
    assert with_lora.shape == out.shape
