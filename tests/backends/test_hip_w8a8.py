"""hip_w8a8 pieces that run anywhere: e4m3fn -> e4m3fnuz weight loading (bitwise), the HCU
module surface, the vendor GEMM wiring through a fake vendor module, provider disabling and
the example script."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import fused_quant as fq
from fused_quant import keys as K
from fused_quant import runtime
from fused_quant.backends.hip_w8a8 import gemms as hip_gemms
from fused_quant.backends.hip_w8a8.fp8 import e4m3fn_to_e4m3fnuz
from fused_quant.contract import QuantizedActivation
from fused_quant.gemm import gemm_providers, quant_gemm
from fused_quant.reference import act_quant_ref
from fused_quant.validation import GemmProviderError, QuantDTypeError, ShapeMismatchError
from tests.helpers import assert_bits_equal

ROOT = Path(__file__).resolve().parents[2]


def test_fnuz_conversion_is_bitwise_and_value_preserving():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    finite = codes[(codes & 0x7F) != 0x7F]  # every e4m3fn pattern but the two NaNs
    w = finite.view(torch.float8_e4m3fn).reshape(2, -1)
    ws = torch.tensor([[0.5], [3.0]])
    wz, wsz, isz = e4m3fn_to_e4m3fnuz(w, ws, torch.tensor([0.25]))
    assert wz.dtype == torch.float8_e4m3fnuz
    want = torch.where(w.view(torch.uint8) == 0x80, torch.zeros_like(w.view(torch.uint8)), w.view(torch.uint8))
    assert_bits_equal(wz.view(torch.uint8), want)
    assert torch.equal(wsz, ws * 2) and torch.equal(isz, torch.tensor([0.5]))
    # same dequantized weights, exactly: fnuz value is half the fn value, the scale doubles
    assert torch.equal(wz.float() * wsz, w.float() * ws)


def test_fnuz_conversion_refuses_nan_and_wrong_dtype():
    nan = torch.tensor([0x7F, 0x01], dtype=torch.uint8).view(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="NaN"):
        e4m3fn_to_e4m3fnuz(nan, torch.ones(1))
    with pytest.raises(QuantDTypeError, match="float8_e4m3fn"):
        e4m3fn_to_e4m3fnuz(torch.zeros(2, dtype=torch.int8), torch.ones(1))


@pytest.mark.parametrize("numerics", ["default", "hcu"])
@pytest.mark.parametrize("shape", [(7, 2 * 96), (2, 3, 2 * 50), (0, 64)])
def test_fused_silu_mul_quant_module(numerics, shape):
    x = (torch.randn(shape) * 3).to(torch.bfloat16)
    xq, xs = fq.FusedSiluAndMulAndQuant(numerics)(x)
    q, s = act_quant_ref("silu_and_mul", x, K.kInt8DynamicTokenSym, numerics=numerics)
    assert_bits_equal(xq, q)
    assert_bits_equal(xs, s)
    assert xq.shape == (*shape[:-1], shape[-1] // 2) and xs.shape == (*shape[:-1], 1)
    xq8, xs8 = fq.FusedSiluAndMulAndQuant(numerics)(x, quant_dtype=torch.float8_e4m3fn)
    q8, s8 = act_quant_ref("silu_and_mul", x, K.kFp8DynamicTokenSym, numerics=numerics)
    assert_bits_equal(xq8, q8)
    assert_bits_equal(xs8, s8)


def test_fused_silu_mul_quant_rejects_other_dtypes():
    with pytest.raises(QuantDTypeError, match="quant_dtype"):
        fq.FusedSiluAndMulAndQuant()(torch.randn(2, 8), quant_dtype=torch.float16)


class FakeVendor:
    """Stands in for lightop.gemm_ops: records calls, returns (status, out)."""

    def __init__(self, status=True, returns=None):
        self.calls, self.status, self.returns = [], status, returns

    def hipblaslt_w8a8_gemm(self, xq, w, xs, ws, m, n, k, layout, out_dtype):
        self.calls.append((tuple(xq.shape), tuple(w.shape), tuple(xs.shape), tuple(ws.shape), m, n, k, layout))
        # as a C kernel reads them: the scales' elements at their pointers plus the row index
        xs, ws = (torch.as_strided(t, (len(t), 1), (1, 1)) for t in (xs, ws))
        out = ((xq.double() @ w.double().T) * xs.double() * ws.double().T).to(out_dtype)
        return (self.status, out) if self.returns is None else self.returns(self.status, out)


@pytest.fixture
def fake_vendor(monkeypatch):
    def install(**kw):
        fake = FakeVendor(**kw)
        pkg, mod = types.ModuleType("lightop"), types.ModuleType("lightop.gemm_ops")
        mod.hipblaslt_w8a8_gemm = fake.hipblaslt_w8a8_gemm
        pkg.gemm_ops = mod
        monkeypatch.setitem(sys.modules, "lightop", pkg)
        monkeypatch.setitem(sys.modules, "lightop.gemm_ops", mod)
        runtime.reset()
        return fake

    yield install
    runtime.reset()


def _operands(m=5, n=16, k=32):
    xq = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8)
    return xq, torch.rand(m, 1) + 0.1, w, torch.rand(n, 1) + 0.1


def test_vendor_found_lazily_with_reason(fake_vendor, monkeypatch):
    fn, why = hip_gemms.vendor_gemm()
    assert fn is None and "lightop.gemm_ops" in why and "lmslim.quant_ops" in why
    fake_vendor()
    fn, why = hip_gemms.vendor_gemm()
    assert fn is not None and why == "lightop.gemm_ops.hipblaslt_w8a8_gemm"


def test_vendor_call_shape_and_status(fake_vendor):
    fake = fake_vendor()
    xq, xs, w, ws = _operands()
    out = hip_gemms._vendor(xq, xs, w, ws, None, torch.bfloat16)
    assert fake.calls == [((5, 32), (16, 32), (5, 1), (16, 1), 5, 16, 32, "NT")]
    assert out.shape == (5, 16)
    for ok in (0, np.int32(0)):
        fake.status = ok
        hip_gemms._vendor(xq, xs, w, ws, None, torch.bfloat16)
    for bad in (False, 1, "error", torch.tensor(0)):
        fake.status = bad
        with pytest.raises(GemmProviderError, match="failed with status"):
            hip_gemms._vendor(xq, xs, w, ws, None, torch.bfloat16)


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_what_the_vendor_returns_is_checked_before_the_bias_is_added(fake_vendor, bias):
    """A wrong shape would broadcast against the bias and a wrong dtype be promoted by it: each is refused, with or
    without a bias."""
    xq, xs, w, ws = _operands()
    b = torch.linspace(-2, 2, 16).to(torch.bfloat16) if bias else None
    for returns, match in ((lambda s, out: (s, out[:, :1].contiguous()), "returned \\(5, 1\\) torch.bfloat16"),
                           (lambda s, out: (s, out.to(torch.int32)), "returned \\(5, 16\\) torch.int32"),
                           (lambda s, out: (s, out.T.contiguous().T), "returned \\(5, 16\\) torch.bfloat16 on cpu, "
                                                                      "strided"),
                           (lambda s, out: out, "returned Tensor, expected \\(status, out\\)"),
                           (lambda s, out: [s, out[:, :1].contiguous()], "returned \\(5, 1\\)"),  # a list: read
                           (lambda s, out: (s, out.tolist()), "returned list, expected a contiguous \\(5, 16\\)")):
        fake_vendor(returns=returns)
        with pytest.raises(GemmProviderError, match=f"hipblaslt_w8a8_gemm \\(lightop.gemm_ops.hipblaslt_w8a8_gemm\\) "
                                                    f"{match}.*; FUSED_QUANT_DISABLED_GEMMS=hipblaslt_w8a8 leaves it"):
            hip_gemms._vendor(xq, xs, w, ws, b, torch.bfloat16)


def test_a_vendor_call_that_raises_is_the_providers_error_with_the_way_around_it(fake_vendor):
    """A vendor build of another signature (or a HIP error) reached the user as a bare TypeError naming a lambda's
    arguments, from the first provider of every int8 GEMM on the node."""
    fake = fake_vendor()

    def other_signature(xq, w, xs, ws, m, n, k, layout, out_dtype, bias):
        raise AssertionError("not called")

    sys.modules["lightop.gemm_ops"].hipblaslt_w8a8_gemm = other_signature
    runtime.reset()
    xq, xs, w, ws = _operands()
    with pytest.raises(GemmProviderError, match="hipblaslt_w8a8_gemm \\(lightop.gemm_ops.hipblaslt_w8a8_gemm\\) "
                                                "raised TypeError: .*missing 1 required positional argument: 'bias' "
                                                "\\(M=5, N=16, K=32\\); FUSED_QUANT_DISABLED_GEMMS=hipblaslt_w8a8 "
                                                "leaves it out of the chain") as exc:
        hip_gemms._vendor(xq, xs, w, ws, None, torch.bfloat16)
    assert isinstance(exc.value.__cause__, TypeError) and not fake.calls

    def out_of_memory(*args):
        raise torch.OutOfMemoryError("HIP out of memory")

    sys.modules["lightop.gemm_ops"].hipblaslt_w8a8_gemm = out_of_memory  # as itself: callers back off on it
    runtime.reset()
    with pytest.raises(torch.OutOfMemoryError, match="HIP out of memory"):
        hip_gemms._vendor(xq, xs, w, ws, None, torch.bfloat16)


@pytest.mark.parametrize("placeholder", [None, "not built"])
def test_a_placeholder_for_the_vendor_function_lets_the_next_module_serve(monkeypatch, placeholder):
    """``lightop.gemm_ops.hipblaslt_w8a8_gemm = None`` (a build without it) ended the search, so lmslim's working one
    was never asked; a string there was taken as the function, and every int8 GEMM failed calling it."""
    fake = FakeVendor()
    for name, fn in (("lightop.gemm_ops", placeholder), ("lmslim.quant_ops", fake.hipblaslt_w8a8_gemm)):
        pkg, mod = types.ModuleType(name.split(".")[0]), types.ModuleType(name)
        mod.hipblaslt_w8a8_gemm = fn
        setattr(pkg, name.split(".")[1], mod)
        monkeypatch.setitem(sys.modules, name.split(".")[0], pkg)
        monkeypatch.setitem(sys.modules, name, mod)
    runtime.reset()
    fn, why = hip_gemms.vendor_gemm()
    assert fn == fake.hipblaslt_w8a8_gemm, why
    assert why == "lmslim.quant_ops.hipblaslt_w8a8_gemm"
    monkeypatch.setitem(sys.modules["lmslim.quant_ops"].__dict__, "hipblaslt_w8a8_gemm", None)
    runtime.reset()
    fn, why = hip_gemms.vendor_gemm()
    assert fn is None and why == (f"lightop.gemm_ops.hipblaslt_w8a8_gemm is {type(placeholder).__name__}, not a "
                                  "function; lmslim.quant_ops.hipblaslt_w8a8_gemm is NoneType, not a function")
    runtime.reset()


def test_strided_scales_reach_the_vendor_contiguous(fake_vendor):
    """The vendor reads ``xs[m]`` at ``xs_ptr + m``: a strided [M, 1] or [N] scale is passed as a contiguous copy,
    so the result is the contiguous scales' (against float64)."""
    fake = fake_vendor()
    xq, xs, w, ws = _operands()
    xs_view = torch.cat([xs, torch.full_like(xs, 1e4)], 1)[:, :1]
    ws_view = torch.cat([ws, torch.full_like(ws, 1e4)], 1)[:, 0]
    out = hip_gemms._vendor(xq, xs_view, w, ws_view, None, torch.bfloat16)  # (fp16 overflows: |out| to ~8e4)
    want = (xq.double() @ w.double().T) * xs.double() * ws.double().T
    assert fake.calls and torch.allclose(out.double(), want, rtol=2**-8, atol=2**-8)  # one bf16 rounding


def test_a_vendor_module_that_fails_as_it_loads_is_a_reason_not_a_crash(monkeypatch):
    """A vendor module whose import raises something other than ImportError (a ctypes library missing its .so):
    the reason names it and the chain goes on to the next provider (none takes CPU tensors here: the error lists
    each one's reason)."""
    import importlib as il

    real = il.import_module

    def broken(name, *a, **kw):
        if name in hip_gemms.VENDOR_MODULES:
            raise OSError(f"lib{name}.so: cannot open shared object file")
        return real(name, *a, **kw)

    monkeypatch.setattr(hip_gemms.importlib, "import_module", broken)
    runtime.reset()
    try:
        fn, why = hip_gemms.vendor_gemm()
        assert fn is None and "lightop.gemm_ops: OSError: liblightop.gemm_ops.so: cannot open" in why
        xq, xs, w, ws = _operands()
        qa = QuantizedActivation(xq, xs, torch.bfloat16, xq.shape, K.kInt8DynamicTokenSym)
        with pytest.raises(fq.BackendUnavailableError, match="hipblaslt_w8a8: no vendor hipblaslt_w8a8_gemm "
                                                             "\\(lightop.*OSError.*; small_m_int8: .*triton_int8: "):
            quant_gemm(qa, w, ws, out_dtype=torch.bfloat16, backend="hip_w8a8")
    finally:
        runtime.reset()  # the vendor's absence is cached per generation


@pytest.mark.parametrize("per_tensor", [False, True], ids=["per-token", "per-tensor"])
def test_vendor_scales_expand_and_bias_adds(fake_vendor, per_tensor):
    """The vendor call takes [M, 1] and [N, 1] scales: a per-tensor activation scale (a static key's one element)
    and a one-element weight scale are expanded to them; the bias is added to what the vendor returns. Against a
    float64 computation of the same operands."""
    fake = fake_vendor()
    xq, xs, w, ws = _operands()
    if per_tensor:
        xs, ws = torch.tensor([0.0625]), torch.tensor([[0.5]])
    bias = torch.linspace(-2, 2, 16).to(torch.bfloat16)
    out = hip_gemms._vendor(xq, xs, w, ws, bias, torch.bfloat16)
    assert fake.calls == [((5, 32), (16, 32), (5, 1), (16, 1), 5, 16, 32, "NT")]
    x_scale = xs.double().reshape(-1, 1).expand(5, 1)
    want = (xq.double() @ w.double().T) * x_scale * ws.double().reshape(-1, 1).expand(16, 1).T + bias.double()
    assert torch.allclose(out.double(), want, rtol=2**-7, atol=2**-7)  # two bf16 roundings: the vendor's, the sum's


def test_vendor_predicate_reasons(fake_vendor):
    from fused_quant.gemm import GemmProblem

    p = GemmProblem(5, 16, 32, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), True, True, False)
    ok, why = hip_gemms._vendor_supported(p)
    assert not ok and "lightop" in why
    fake_vendor()
    ok, why = hip_gemms._vendor_supported(p)
    assert not ok and "GPU" in why


def test_wrong_k_never_reaches_the_vendor(fake_vendor):
    """The seed bug: the [m, 2H] placeholder against an [N, H] weight stops at the checked entry."""
    fake = fake_vendor()
    xq, xs, w, ws = _operands(m=4, n=16, k=32)
    placeholder = torch.randint(-128, 128, (4, 64), dtype=torch.int8)
    qa = QuantizedActivation(placeholder, xs[:4], torch.bfloat16, placeholder.shape, K.kInt8DynamicTokenSym)
    with pytest.raises(ShapeMismatchError, match="expected K=32.*received K=64.*placeholder") as exc:
        quant_gemm(qa, w, ws, out_dtype=torch.bfloat16, layer="model.layers.0.mlp.down_proj", backend="hip_w8a8")
    assert exc.value.k == 32 and exc.value.layer == "model.layers.0.mlp.down_proj"
    assert fake.calls == []


def test_hip_provider_order_and_disabling(monkeypatch):
    assert [p.name for p in gemm_providers("hip_w8a8", "int8")] == ["hipblaslt_w8a8", "small_m_int8", "int_mm_int8",
                                                                   "triton_int8"]
    assert [p.name for p in gemm_providers("hip_w8a8", "fp8")] == ["small_m_fp8", "scaled_mm_fp8"]
    monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "hipblaslt_w8a8, int_mm_int8, small_m_int8")
    fq.reset()  # the variable is read once per runtime generation
    assert [p.name for p in gemm_providers("hip_w8a8", "int8")] == ["triton_int8"]


def test_example_script_runs_here():
    spec = importlib.util.spec_from_file_location("hcu_mlp", ROOT / "examples" / "hcu_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.main(["--tokens", "9"])
    assert result["fused_vs_unfused_max_abs"] == 0.0  # default profile: fusion changes no bit
    assert result["gemm_vs_float64_max_rel"] < 2 ** -7
