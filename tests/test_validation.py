"""Every error path: the exact error type, and a message that names what was expected and received.

Per-call checks read metadata only; static scale values are checked once, when set on a layer.
User input is never checked with a bare ``assert`` (python -O strips it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch
from torch import nn

import fused_quant
from fused_quant import keys as K
from fused_quant.selection import select_backend
from fused_quant.contract import QuantizedActivation, as_quantized_activation
from fused_quant.gemm import quant_gemm, register_gemm_provider, unregister_gemm_provider
from fused_quant.modules import QuantLinear, SiluAndMul
from fused_quant.numerics import get_profile
from fused_quant.platforms import probe
from fused_quant.reference import act_quant_ref
from fused_quant.registry import fused_act_quant, maybe_fused_act_quant
from fused_quant.validation import (
    BackendUnavailableError,
    DeviceMismatchError,
    FusedQuantError,
    GemmProviderError,
    LayoutError,
    NumericsProfileError,
    QuantDTypeError,
    QuantKeyMismatchError,
    ScaleError,
    ShapeMismatchError,
)

pytestmark = pytest.mark.torch

ACTS = ("relu2", "silu_and_mul", "identity")
STATIC_KEYS = {n: k for n, k in K.KEYS.items() if K.is_static(k)}
DYNAMIC_KEYS = {n: k for n, k in K.KEYS.items() if not K.is_static(k)}
BACKEND_NAMES = ("torch", "triton_fp8", "hip_w8a8")


@pytest.fixture(autouse=True)
def torch_backend(backend_env):
    """These tests exercise the pure-torch backend whatever the node would pick."""
    backend_env("torch")


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


# --- activation input -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (torch.int32, torch.int8, torch.uint8, torch.bool, torch.float64,
                                   torch.float8_e4m3fn, torch.float8_e4m3fnuz), ids=str)
@pytest.mark.parametrize("act", ACTS)
def test_wrong_input_dtype(act, dtype):
    x = torch.zeros(4, 8).to(dtype)
    for call in (lambda: fused_act_quant(act, x, K.kInt8DynamicTokenSym),
                 lambda: act_quant_ref(act, x, K.kInt8DynamicTokenSym)):
        with pytest.raises(QuantDTypeError) as exc:
            call()
        msg = str(exc.value)
        assert "bfloat16, float16, float32" in msg and str(dtype) in msg, msg


def test_wrong_input_dtype_with_a_key_exposed_raises_not_falls_back():
    """A malformed input to maybe_fused_act_quant raises (it is not an 'unsupported' input)."""
    layer = _layer()
    with pytest.raises(QuantDTypeError, match=r"torch\.int32"):
        maybe_fused_act_quant(SiluAndMul(), torch.zeros(4, 32, dtype=torch.int32), layer)


@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 1)], ids=str)  # odd widths, 1 included
def test_silu_and_mul_odd_last_dim(shape):
    x = torch.randn(shape)
    with pytest.raises(ShapeMismatchError) as exc:
        fused_act_quant("silu_and_mul", x, K.kFp8DynamicTokenSym)
    msg = str(exc.value)
    assert "even" in msg and f"got {shape[-1]}" in msg and str(tuple(shape)) in msg, msg
    assert exc.value.x_shape == shape


@pytest.mark.parametrize("act", ACTS)
def test_rank0_input(act):
    with pytest.raises(ShapeMismatchError, match=r"rank >= 1.*0-d tensor"):
        fused_act_quant(act, torch.tensor(1.0), K.kInt8DynamicTokenSym)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (2, 0, 0)], ids=str)
@pytest.mark.parametrize("act", ACTS)
def test_zero_width_last_dim(act, shape):
    # a row of zero features has no per-token max: rejected, not an empty output
    with pytest.raises(ShapeMismatchError) as exc:
        fused_act_quant(act, torch.zeros(shape), K.kInt8DynamicTokenSym)
    assert "must be > 0" in str(exc.value) and str(tuple(shape)) in str(exc.value)


def test_non_tensor_input_is_a_type_error():
    with pytest.raises(TypeError, match="must be a torch.Tensor, got list"):
        fused_act_quant("relu2", [1.0, 2.0], K.kInt8DynamicTokenSym)
    with pytest.raises(TypeError, match="key must be a QuantKey, got str"):
        fused_act_quant("relu2", torch.randn(2, 4), "int8_dynamic_token")


# --- K mismatch -------------------------------------------------------------------------------


def _check_k_mismatch(err: ShapeMismatchError, *, layer, m, n, k, x_shape, kx):
    msg = str(err)
    assert err.layer == layer and err.m == m and err.n == n and err.k == k
    assert err.x_shape == x_shape and err.w_shape == (n, k)
    assert f"expected K={k}" in msg and f"received K={kx}" in msg and str(x_shape) in msg, msg
    if layer:
        assert msg.startswith(f"{layer}:"), msg


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_k_mismatch_in_quant_linear(key_name):
    layer = _layer(K.KEYS[key_name])
    x = torch.randn(2, 3, 17, dtype=torch.bfloat16)  # rank 3: M counts every token, K = 17 vs 16
    with pytest.raises(ShapeMismatchError) as exc:
        layer(x)
    _check_k_mismatch(exc.value, layer=layer.name, m=6, n=8, k=16, x_shape=(2, 3, 17), kx=17)
    assert "another layer" in str(exc.value)  # the likely cause for an unrelated K


def test_k_mismatch_in_quant_gemm():
    layer = _layer()
    qa = _qa(5, 32)  # K = 2 * 16: the gate_up placeholder
    with pytest.raises(ShapeMismatchError) as exc:
        quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=torch.bfloat16, layer="blk.7.down")
    _check_k_mismatch(exc.value, layer="blk.7.down", m=5, n=8, k=16, x_shape=(5, 32), kx=32)
    assert "placeholder" in str(exc.value)
    qa = _qa(5, 8)  # K = 16 / 2: silu_and_mul applied twice
    with pytest.raises(ShapeMismatchError) as exc:
        quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    _check_k_mismatch(exc.value, layer=None, m=5, n=8, k=16, x_shape=(5, 8), kx=8)
    assert str(exc.value).startswith("quant_gemm:") and "halved twice" in str(exc.value)


def test_gemm_weight_and_activation_rank():
    layer = _layer()
    qa = _qa(3, 16)
    with pytest.raises(ShapeMismatchError, match=r"weight must be 2-D \[N, K\], got shape \(1, 8, 16\)"):
        quant_gemm(qa, layer.weight[None], layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(ShapeMismatchError, match=r"rank >= 1.*0-d") as exc:
        layer(None, x_and_scale_quanted=(torch.zeros((), dtype=torch.int8), torch.ones(())))
    assert exc.value.layer == layer.name


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
    with pytest.raises(TypeError, match="one-element float32 torch.Tensor, got NoneType"):
        fused_act_quant("relu2", x, key)  # static key, no scale
    with pytest.raises(TypeError, match="got float"):
        fused_act_quant("relu2", x, key, 0.5)


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
    assert msg.startswith("blk.0.o_proj:") and "finite and > 0" in msg and f"got {value!r}" in msg, msg
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


# --- the HCU tuple ----------------------------------------------------------------------------


def test_placeholder_token_count_mismatch():
    layer = _layer()
    xq = torch.zeros(4, 16, dtype=torch.int8)
    xs = torch.ones(4, 1)
    for placeholder in (torch.randn(3, 32), torch.randn(2, 2, 32), torch.randn(32)):
        with pytest.raises(ShapeMismatchError) as exc:
            layer(placeholder, x_and_scale_quanted=(xq, xs))
        msg = str(exc.value)
        assert "token-count mismatch" in msg and str(tuple(placeholder.shape)) in msg and "(4, 16)" in msg, msg
        assert exc.value.layer == layer.name and exc.value.x_shape == (4, 16) and exc.value.w_shape == (8, 16)


@pytest.mark.parametrize("xs_shape", [(3, 1), (5, 1), (4,), (1, 4), (4, 2), ()], ids=str)
def test_per_token_scale_with_wrong_rows(xs_shape):
    # (4,) and (1, 4): 4 values, but not one per row in a [*tokens, 1] layout
    layer = _layer()
    xq = torch.zeros(4, 16, dtype=torch.int8)
    with pytest.raises(ShapeMismatchError) as exc:
        layer(torch.randn(4, 32), x_and_scale_quanted=(xq, torch.ones(xs_shape)))
    msg = str(exc.value)
    assert "with 4 rows" in msg and f"got shape {tuple(xs_shape)}" in msg, msg
    assert exc.value.layer == layer.name and exc.value.m == 4


def test_per_tensor_scale_with_wrong_numel():
    layer = _layer(K.kInt8StaticTensorSym)
    xq = torch.zeros(4, 16, dtype=torch.int8)
    with pytest.raises(ScaleError, match=r"per-tensor activation scale must have 1 element, got shape \(4, 1\)"):
        layer(None, x_and_scale_quanted=(xq, torch.ones(4, 1)))


def test_hcu_tuple_dtypes():
    layer = _layer()
    with pytest.raises(QuantDTypeError, match=r"expected activation dtype torch.int8 .* got torch.float32"):
        layer(None, x_and_scale_quanted=(torch.zeros(4, 16), torch.ones(4, 1)))
    with pytest.raises(QuantDTypeError, match=r"activation scale must be float32, got torch.bfloat16"):
        layer(None, x_and_scale_quanted=(torch.zeros(4, 16, dtype=torch.int8), torch.ones(4, 1, dtype=torch.bfloat16)))
    fp8_layer = _layer(K.kFp8DynamicTokenSym)
    wrong_fp8 = ({torch.float8_e4m3fn, torch.float8_e4m3fnuz} - {fp8_layer.weight.dtype}).pop()
    with pytest.raises(QuantDTypeError, match=re.escape(f"expected activation dtype {fp8_layer.weight.dtype}")):
        fp8_layer(None, x_and_scale_quanted=(torch.zeros(4, 16).to(wrong_fp8), torch.ones(4, 1)))


def test_hcu_tuple_malformed():
    layer = _layer()
    xq, xs = torch.zeros(4, 16, dtype=torch.int8), torch.ones(4, 1)
    with pytest.raises(TypeError, match="x_and_scale_quanted must be a \\(xq, xs\\) pair"):
        layer(None, x_and_scale_quanted=(xq,))
    with pytest.raises(TypeError, match="x_and_scale_quanted must be a \\(xq, xs\\) pair"):
        layer(None, x_and_scale_quanted=(xq, 1.0))
    with pytest.raises(TypeError, match="not both"):
        layer(_qa(4, 16), x_and_scale_quanted=(xq, xs))
    with pytest.raises(TypeError, match="placeholder x must be a tensor or None, got list"):
        layer([1.0], x_and_scale_quanted=(xq, xs))
    with pytest.raises(TypeError, match="pass x"):
        layer()


# --- keys, backends, profiles -----------------------------------------------------------------


def test_key_mismatch():
    qa = _qa(3, 16, K.kInt8DynamicTokenSym)
    with pytest.raises(QuantKeyMismatchError) as exc:
        as_quantized_activation(qa, K.kFp8DynamicTokenSym)
    msg = str(exc.value)
    assert str(K.kInt8DynamicTokenSym) in msg and str(K.kFp8DynamicTokenSym) in msg, msg
    with pytest.raises(QuantKeyMismatchError, match="accepts None"):
        as_quantized_activation(qa, None)
    for key in (K.kInt8StaticTensorSym, K.kFp8DynamicTokenSym, K.kFp8StaticTensorSym):
        layer = _layer(key)
        with pytest.raises(QuantKeyMismatchError, match=re.escape(f"accepts {key}")):
            layer(qa)
    # a plain tensor is not narrowed, and a matching key passes through unchanged
    assert as_quantized_activation(torch.randn(3, 16), K.kInt8DynamicTokenSym) is None
    assert as_quantized_activation(qa, K.kInt8DynamicTokenSym) is qa


def test_unknown_backend_name():
    with pytest.raises(BackendUnavailableError) as exc:
        fused_act_quant("relu2", torch.randn(2, 4), K.kInt8DynamicTokenSym, backend="nope")
    msg = str(exc.value)
    assert "'nope'" in msg and all(name in msg for name in BACKEND_NAMES), msg
    with pytest.raises(BackendUnavailableError) as exc:
        select_backend(probe(), "nope")
    msg = str(exc.value)
    assert "'nope'" in msg and all(name in msg for name in ("auto", *BACKEND_NAMES)), msg


def test_quant_gemm_unknown_backend_lists_valid_names():
    layer = _layer()
    with pytest.raises(BackendUnavailableError) as exc:
        quant_gemm(_qa(3, 16), layer.weight, layer.weight_scale, out_dtype=torch.bfloat16, backend="nope")
    msg = str(exc.value)
    assert "'nope'" in msg and all(name in msg for name in BACKEND_NAMES), msg


def test_unknown_numerics_profile():
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    layer = _layer(k=4)
    calls = [
        lambda: get_profile("nope"),
        lambda: get_profile(7),
        lambda: fused_act_quant("silu_and_mul", x, K.kInt8DynamicTokenSym, numerics="nope"),
        lambda: act_quant_ref("silu_and_mul", x, K.kInt8DynamicTokenSym, numerics="nope"),
        lambda: maybe_fused_act_quant(SiluAndMul(), x, layer, numerics="nope"),
    ]
    for call in calls:
        with pytest.raises(NumericsProfileError) as exc:
            call()
        assert "expected one of default, hcu" in str(exc.value)


def test_unknown_numerics_profile_from_env(monkeypatch):
    monkeypatch.setenv("FUSED_QUANT_NUMERICS", "fast")
    with pytest.raises(NumericsProfileError, match="'fast'"):
        maybe_fused_act_quant(SiluAndMul(), torch.randn(3, 8), _layer(k=4))


# --- GEMM entry: layout, bias, scales, devices, output dtype ----------------------------------


def test_non_contiguous_quantized_activation():
    layer = _layer()
    xq = torch.zeros(16, 3, dtype=torch.int8).t()  # [3, 16] with strides (1, 3)
    qa = QuantizedActivation(xq, torch.ones(3, 1), torch.bfloat16, xq.shape, K.kInt8DynamicTokenSym)
    with pytest.raises(LayoutError, match=r"must be contiguous, got strides \(1, 3\)"):
        quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(LayoutError, match=r"weight must be contiguous"):
        quant_gemm(_qa(3, 16), layer.weight.t().contiguous().t(), layer.weight_scale, out_dtype=torch.bfloat16)


def test_bias_wrong_shape_and_dtype():
    layer = _layer()
    qa = _qa(3, 16)
    for bias in (torch.zeros(9, dtype=torch.bfloat16), torch.zeros(1, 8, dtype=torch.bfloat16)):
        with pytest.raises(ShapeMismatchError) as exc:
            quant_gemm(qa, layer.weight, layer.weight_scale, bias, out_dtype=torch.bfloat16, layer="blk.2.up")
        assert f"bias must be [N=8], got {tuple(bias.shape)}" in str(exc.value)
        assert exc.value.layer == "blk.2.up" and exc.value.n == 8
    with pytest.raises(QuantDTypeError, match=r"bias dtype torch.float32 must equal the output dtype torch.bfloat16"):
        quant_gemm(qa, layer.weight, layer.weight_scale, torch.zeros(8), out_dtype=torch.bfloat16)
    with pytest.raises(DeviceMismatchError, match="bias is on meta, activation on cpu"):
        quant_gemm(qa, layer.weight, layer.weight_scale, torch.zeros(8, dtype=torch.bfloat16, device="meta"),
                   out_dtype=torch.bfloat16)


def test_gemm_scales_devices_and_output_dtype():
    layer = _layer()
    qa = _qa(3, 16)
    with pytest.raises(ScaleError, match=r"weight scale must have N=8 .* got \(3, 1\)"):
        quant_gemm(qa, layer.weight, layer.weight_scale[:3], out_dtype=torch.bfloat16)
    with pytest.raises(QuantDTypeError, match=r"weight scale must be float32, got torch.float16"):
        quant_gemm(qa, layer.weight, layer.weight_scale.half(), out_dtype=torch.bfloat16)
    with pytest.raises(DeviceMismatchError, match="weight scale is on meta, activation on cpu"):
        quant_gemm(qa, layer.weight, layer.weight_scale.to("meta"), out_dtype=torch.bfloat16)
    with pytest.raises(DeviceMismatchError, match="activation scale is on meta, activation on cpu"):
        quant_gemm(QuantizedActivation(qa.data, qa.scale.to("meta"), torch.bfloat16, qa.data.shape, qa.quant_key),
                   layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(QuantDTypeError, match=r"output dtype must be bfloat16, float16 or float32, got torch.float64"):
        quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=torch.float64)
    with pytest.raises(QuantDTypeError, match=r"needs fp8 weights, layer holds torch.int8"):
        quant_gemm(_qa(3, 16, K.kFp8DynamicTokenSym), layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(QuantDTypeError, match=r"output dtype must be one of bf16, fp16, fp32; got torch.float64"):
        QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, out_dtype=torch.float64)
    with pytest.raises(TypeError, match="expected a QuantizedActivation, got Tensor"):
        quant_gemm(qa.data, layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)


def test_activation_on_another_device_than_the_weight():
    layer = _layer()
    with pytest.raises(DeviceMismatchError) as exc:
        layer(torch.randn(3, 16, device="meta"))
    assert str(exc.value) == f"{layer.name}: weight is on cpu, activation on meta"


@pytest.mark.parametrize("bad", ["shape", "dtype", "not_a_tensor", "rank1"])
def test_gemm_provider_returning_the_wrong_thing(bad):
    layer = _layer()

    def provider(xq, xs, w, ws, bias, out_dtype):
        m, n = xq.shape[0], w.shape[0]
        return {"shape": lambda: torch.zeros(m, n + 1, dtype=out_dtype),
                "dtype": lambda: torch.zeros(m, n, dtype=torch.float64),
                "not_a_tensor": lambda: [[0.0] * n] * m,
                "rank1": lambda: torch.zeros(m * n, dtype=out_dtype)}[bad]()

    register_gemm_provider("test_bad_provider", provider, kind="int8", backends=("torch",))
    try:
        with pytest.raises(GemmProviderError) as exc:
            layer(torch.randn(5, 16, dtype=torch.bfloat16))
    finally:
        unregister_gemm_provider("test_bad_provider")
    msg = str(exc.value)
    assert msg.startswith(f"{layer.name}: GEMM provider test_bad_provider returned"), msg
    assert "expected (5, 8) torch.bfloat16 on cpu" in msg, msg
    # unregistered: the built-in provider serves the layer again
    assert layer(torch.randn(5, 16, dtype=torch.bfloat16)).shape == (5, 8)


def test_error_types_are_fused_quant_errors_and_builtin_bases():
    """Callers may catch the builtin base (ValueError, TypeError, RuntimeError) or FusedQuantError."""
    assert issubclass(ShapeMismatchError, ValueError) and issubclass(ScaleError, ValueError)
    assert issubclass(QuantDTypeError, TypeError) and issubclass(BackendUnavailableError, RuntimeError)
    assert issubclass(GemmProviderError, RuntimeError) and issubclass(LayoutError, ValueError)
    for err in (ShapeMismatchError, QuantDTypeError, BackendUnavailableError, ScaleError, DeviceMismatchError,
                LayoutError, QuantKeyMismatchError, NumericsProfileError, GemmProviderError):
        assert issubclass(err, FusedQuantError)


# --- errors raised on purpose are FusedQuantErrors (FusedQuantError's docstring: "Base class of
# every error fused-quant raises on purpose"), and keep their builtin base ----------------------


UNSUPPORTED_KEY = K.QuantKey(K.FP8_DTYPE, K.ScaleDesc(torch.float32, False, K.GroupShape(1, 128)))


@pytest.mark.parametrize("case", ["dynamic_key_with_scale", "unknown_activation_name", "unknown_activation_module",
                                  "unsupported_key", "unsupported_key_layer", "unsupported_fp8_dtype"])
def test_on_purpose_errors_are_fused_quant_errors(case):
    x = torch.randn(2, 8)
    call, words = {
        "dynamic_key_with_scale": (lambda: fused_act_quant("relu2", x, K.kInt8DynamicTokenSym, torch.ones(1)),
                                   "scale=None"),
        "unknown_activation_name": (lambda: fused_act_quant("gelu", x, K.kInt8DynamicTokenSym),
                                    "'gelu'; expected one of silu_and_mul, relu2, identity"),
        "unknown_activation_module": (lambda: fused_act_quant(nn.GELU(), x, K.kInt8DynamicTokenSym),
                                      "GELU is not a known activation; expected one of SiluAndMul"),
        "unsupported_key": (lambda: fused_act_quant("relu2", x, UNSUPPORTED_KEY),
                            "supported: fp8_static_tensor, fp8_dynamic_token, int8_static_tensor, int8_dynamic_token"),
        "unsupported_key_layer": (lambda: QuantLinear.from_float(nn.Linear(8, 4), UNSUPPORTED_KEY),
                                  "unsupported quant key"),
        "unsupported_fp8_dtype": (lambda: QuantLinear.from_float(nn.Linear(8, 4), K.kFp8DynamicTokenSym,
                                                                 fp8_dtype=torch.float8_e5m2),
                                  "float8_e5m2"),
    }[case]
    with pytest.raises(ValueError) as exc:  # callers catching ValueError keep working
        call()
    assert isinstance(exc.value, FusedQuantError), f"{type(exc.value).__name__}: {exc.value}"
    assert words in str(exc.value), str(exc.value)


# --- no bare assert in library code -----------------------------------------------------------


PACKAGE = Path(fused_quant.__file__).resolve().parent


def _asserts(source: str, filename: str) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(source, filename)) if isinstance(node, ast.Assert)]


def test_no_bare_assert_in_library_code():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20, f"expected the whole package under {PACKAGE}, found {len(files)} files"
    # the detector itself finds an assert statement, including one nested in a block
    assert _asserts("def f(x):\n    if x:\n        assert x > 0, 'no'\n", "<probe>") == [3]
    found = [f"{p.relative_to(PACKAGE.parent)}:{line}" for p in files
             for line in _asserts(p.read_text(encoding="utf-8"), str(p))]
    assert not found, f"bare assert in library code (python -O strips it): {found}"
