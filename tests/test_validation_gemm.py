"""Error paths of the GEMM entry: the exact error type, and a message that names what was expected
and received. K mismatches, the HCU (xq, xs) tuple, layout, bias, scales, devices, output dtype and
what a GEMM provider returns (split from test_validation.py; shared helpers in
tests/validation_fixtures.py).
"""

from __future__ import annotations

import re

import pytest
import torch

from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.errors import BackendUnavailableError
from fused_quant.gemm import dequant_epilogue, quant_gemm, register_gemm_provider, unregister_gemm_provider
from fused_quant.modules import QuantLinear
from fused_quant.validation import (
    DeviceMismatchError,
    GemmProviderError,
    LayoutError,
    QuantDTypeError,
    ScaleError,
    ShapeMismatchError,
)
from tests.cli_fixtures import node  # noqa: F401  (a fixture)
from tests.helpers import assert_gemm_close
from tests.validation_fixtures import _layer, _qa

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]


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
    # K = 8 is also the weight's N: each cause the sizes fit is named
    assert "likely cause: the weight is transposed ([K=8, N=16]" in str(exc.value)
    wide = _layer(K.kInt8DynamicTokenSym, n=6)  # [N=6, K=16] given transposed, [16, 6]: K is its first dim
    with pytest.raises(ShapeMismatchError, match=r"likely cause: the weight is transposed \(\[K=16, N=6\] given where "
                                                 r"\[N, K\] is expected: .*\); or an activation produced for another "
                                                 r"layer$"):
        quant_gemm(_qa(5, 16), wide.weight.t().contiguous(), torch.ones(16, 1), out_dtype=torch.bfloat16)


def test_gemm_weight_and_activation_rank():
    layer = _layer()
    qa = _qa(3, 16)
    with pytest.raises(ShapeMismatchError, match=r"weight must be 2-D \[N, K\], got shape \(1, 8, 16\)"):
        quant_gemm(qa, layer.weight[None], layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(ShapeMismatchError, match=r"rank >= 1.*0-d") as exc:
        layer(None, x_and_scale_quanted=(torch.zeros((), dtype=torch.int8), torch.ones(())))
    assert exc.value.layer == layer.name


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
    with pytest.raises(ScaleError, match=r"weight scale: must hold N=8 scales .* got shape \(3, 1\)"):
        quant_gemm(qa, layer.weight, layer.weight_scale[:3], out_dtype=torch.bfloat16)
    with pytest.raises(QuantDTypeError, match=r"weight scale must be float32, got torch.float16"):
        quant_gemm(qa, layer.weight, layer.weight_scale.half(), out_dtype=torch.bfloat16)
    with pytest.raises(DeviceMismatchError, match="weight scale is on meta, activation on cpu"):
        quant_gemm(qa, layer.weight, layer.weight_scale.to("meta"), out_dtype=torch.bfloat16)
    with pytest.raises(DeviceMismatchError, match="activation scale is on meta, activation on cpu"):
        quant_gemm(QuantizedActivation(qa.data, qa.scale.to("meta"), torch.bfloat16, qa.data.shape, qa.quant_key),
                   layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(QuantDTypeError, match=r"output dtype must be torch.bfloat16, torch.float16 or torch.float32, "
                                              r"got torch.float64"):
        quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=torch.float64)
    for name in ("bfloat16", "torch.bfloat16"):  # a dtype's name: a wrong type, not a refused bfloat16
        with pytest.raises(TypeError, match=rf"output dtype must be a torch.dtype .*, got str '{name}'$"):
            quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=name)
        with pytest.raises(TypeError, match=rf"QuantLinear: output dtype must be a torch.dtype .*, got str '{name}'$"):
            QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, out_dtype=name)
    with pytest.raises(QuantDTypeError, match=r"needs fp8 weights, layer holds torch.int8"):
        quant_gemm(_qa(3, 16, K.kFp8DynamicTokenSym), layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    with pytest.raises(QuantDTypeError, match=r"output dtype must be torch.bfloat16, torch.float16 or torch.float32, "
                                              r"got torch.float64"):
        QuantLinear(layer.weight, layer.weight_scale, K.kInt8DynamicTokenSym, out_dtype=torch.float64)
    with pytest.raises(TypeError, match="expected a QuantizedActivation, got Tensor"):
        quant_gemm(qa.data, layer.weight, layer.weight_scale, out_dtype=torch.bfloat16)
    for wrong in (layer, 3):  # the module itself was taken in eager calls and crashed torch.compile's op call
        with pytest.raises(TypeError, match=rf"quant_gemm: layer must be the layer's name \(a str\) or None, got "
                                            rf"{type(wrong).__name__}$"):
            quant_gemm(qa, layer.weight, layer.weight_scale, out_dtype=torch.bfloat16, layer=wrong)


@pytest.mark.parametrize("key_name", list(K.KEYS))
@pytest.mark.parametrize("n,k", [(0, 16), (8, 0), (0, 0)])
def test_empty_n_or_k_is_answered_without_a_provider(monkeypatch, key_name, n, k):
    """The checked entry takes a weight of N = 0 or K = 0 (a QuantLinear refuses one) and answers it without a
    provider, whose tables and kernels have no such shape (on a GPU the small-M chain's row lookup divided by
    it): an empty ``[*lead, 0]``, or over K = 0 the epilogue of a zero accumulator, ``Tout(0 * xs * ws) + bias``
    in float64 (a NaN or Inf scale makes NaN, not the bias)."""
    import fused_quant.gemm as gemm_module

    def no_provider(*args, **kwargs):
        raise AssertionError("a provider was asked for an empty problem")

    monkeypatch.setattr(gemm_module, "select_gemm_provider", no_provider)
    key = K.KEYS[key_name]
    dtype = torch.float8_e4m3fn if K.is_fp8(key) else torch.int8
    lead, out_dtype = (2, 3), torch.float16
    xs = torch.tensor([[0.5], [float("inf")], [2.0], [float("nan")], [1e-40], [3e38]])[:, :1]
    xs = xs.reshape(*lead, 1) if not K.is_static(key) else torch.tensor([0.25])
    qa = QuantizedActivation(torch.zeros(*lead, k, dtype=dtype), xs, torch.bfloat16, torch.Size((*lead, k)), key)
    ws = torch.linspace(0.5, 4.0, n) if n else torch.zeros(0)
    bias = torch.linspace(-3, 3, n).to(out_dtype)
    out = quant_gemm(qa, torch.zeros(n, k, dtype=dtype), ws, bias, out_dtype=out_dtype)
    assert out.shape == (*lead, n) and out.dtype == out_dtype
    want = (torch.zeros(*lead, n, dtype=torch.float64) * xs.double() * ws.double()).to(out_dtype) + bias
    assert torch.equal(out.isnan(), want.isnan()) and torch.equal(out.nan_to_num(), want.nan_to_num())


def test_activation_on_another_device_than_the_weight():
    layer = _layer()
    with pytest.raises(DeviceMismatchError) as exc:
        layer(torch.randn(3, 16, device="meta"))
    assert str(exc.value) == f"{layer.name}: weight is on cpu, activation on meta"


@pytest.mark.parametrize("bad", ["shape", "dtype", "not_a_tensor", "rank1", "strided"])
def test_gemm_provider_returning_the_wrong_thing(bad):
    """What a provider returns is checked before anyone reads it; a column-major [M, N] among it: the GEMM op's fake
    implementation promises row-major, so an Inductor-compiled layer read such an output with the wrong strides."""
    layer = _layer()

    def provider(xq, xs, w, ws, bias, out_dtype):
        m, n = xq.shape[0], w.shape[0]
        return {"shape": lambda: torch.zeros(m, n + 1, dtype=out_dtype),
                "dtype": lambda: torch.zeros(m, n, dtype=torch.float64),
                "not_a_tensor": lambda: [[0.0] * n] * m,
                "rank1": lambda: torch.zeros(m * n, dtype=out_dtype),
                "strided": lambda: torch.zeros(n, m, dtype=out_dtype).t()}[bad]()

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


def test_the_torch_int8_gemm_gives_int32s_one_zero():
    """A zero activation row against a weight row of negative codes: the int32 accumulator is 0, whose product with
    the scales is +0.0; torch's float64 matmul of one product (K = 1) keeps -0.0, which the torch provider turns to
    +0.0 (the bits every other provider gives)."""
    for m, k, n in ((3, 1, 7), (64, 1, 64), (5, 2, 3)):
        xq, w = torch.zeros(m, k, dtype=torch.int8), -torch.ones(n, k, dtype=torch.int8)
        qa = QuantizedActivation(xq, torch.ones(m, 1), torch.bfloat16, xq.shape, K.kInt8DynamicTokenSym)
        out = quant_gemm(qa, w, torch.full((n, 1), 0.5), out_dtype=torch.float32, backend="torch")
        assert torch.equal(out, torch.zeros(m, n)) and not torch.signbit(out).any(), (m, k, n)


def test_a_named_backend_serves_where_the_variable_names_one_this_node_cannot_run(node, monkeypatch):
    """``quant_gemm(backend="torch")`` (the selftest's GEMM checks of ``--backend torch``) runs the torch chain on a
    CPU node whose FUSED_QUANT_BACKEND names triton_fp8; it read the current backend for its cache key and raised
    that backend's refusal. Without ``backend`` the call still refuses, naming the variable."""
    from tests.test_cli_selftest import CPU_NO_TRITON

    node(CPU_NO_TRITON)
    monkeypatch.setenv("FUSED_QUANT_BACKEND", "triton_fp8")
    for key in (K.kInt8DynamicTokenSym, K.kFp8DynamicTokenSym):
        xq, w = (torch.randint(-3, 4, (n, 32)).to(key.dtype) for n in (3, 8))
        qa = QuantizedActivation(xq, torch.rand(3, 1) + 0.5, torch.bfloat16, xq.shape, key)
        ws = torch.rand(8, 1) + 0.5
        out = quant_gemm(qa, w, ws, out_dtype=torch.float32, backend="torch")
        assert_gemm_close(out, xq, qa.scale, w, ws, None, exact_acc=key.dtype == torch.int8)
        with pytest.raises(BackendUnavailableError, match="FUSED_QUANT_BACKEND=triton_fp8 cannot run here"):
            quant_gemm(qa, w, ws, out_dtype=torch.float32)


def test_the_float64_bound_takes_an_fp32_overflow_with_the_products_sign_under_a_bias():
    """acc * xs past fp32's range is +-Inf with the product's sign, and a finite bias added after keeps it, where
    the float64 sum with the bias is finite and of the other sign: the bound takes it (it refused the spec's bits)."""
    xq, w = torch.ones(1, 16).to(torch.float8_e4m3fn), torch.ones(1, 16).to(torch.float8_e4m3fn)
    xs, ws, b = torch.tensor([[3e38]]), torch.tensor([[1e-40]]), torch.tensor([-100.0], dtype=torch.bfloat16)
    out = dequant_epilogue(xq.float() @ w.float().T, xs, ws, b, torch.bfloat16)
    assert out.item() == float("inf")
    assert_gemm_close(out, xq, xs, w, ws, b, exact_acc=False)
    with pytest.raises(AssertionError, match="outside the float64 bound"):  # the other infinity is still refused
        assert_gemm_close(-out, xq, xs, w, ws, b, exact_acc=False)
