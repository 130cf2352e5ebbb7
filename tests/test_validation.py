"""Every error path: the exact error type, and a message that names what was expected and received.

Per-call checks read metadata only; static scale values are checked once, when set on a layer.
User input is never checked with a bare ``assert`` (python -O strips it).
This file: the producers' input, keys, backends and numerics profiles, the error types; the
GEMM entry is in test_validation_gemm.py, static scales in test_validation_scales.py (shared
helpers in tests/validation_fixtures.py).
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
from fused_quant.contract import as_quantized_activation
from fused_quant.gemm import quant_gemm
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
from tests.validation_fixtures import _layer, _qa

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_backend")]

ACTS = ("relu2", "silu_and_mul", "identity")
BACKEND_NAMES = ("torch", "triton_fp8", "hip_w8a8")


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
    with pytest.raises(TypeError, match="key must be a fused_quant QuantKey, a key name .* got builtins.NoneType"):
        fused_act_quant("relu2", torch.randn(2, 4), None)
    with pytest.raises(fused_quant.UnsupportedError, match="unknown quant key name 'int8'"):
        fused_act_quant("relu2", torch.randn(2, 4), "int8")


# --- keys, backends, profiles -----------------------------------------------------------------


def test_key_mismatch():
    qa = _qa(3, 16, K.kInt8DynamicTokenSym)
    with pytest.raises(QuantKeyMismatchError) as exc:
        as_quantized_activation(qa, K.kFp8DynamicTokenSym)
    msg = str(exc.value)
    # named as every message names keys: the short name
    assert msg == "QuantizedActivation carries key int8_dynamic_token, but its consumer accepts fp8_dynamic_token", msg
    with pytest.raises(QuantKeyMismatchError, match="accepts None"):
        as_quantized_activation(qa, None)
    for key in (K.kInt8StaticTensorSym, K.kFp8DynamicTokenSym, K.kFp8StaticTensorSym):
        layer = _layer(key)
        with pytest.raises(QuantKeyMismatchError, match=re.escape(f"accepts {K.key_name(key)}")):
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


# --- error types ----------------------------------------------------------------------------


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
