"""The float64 oracle of the GEMM tests (``tests.helpers.assert_gemm_close``) at the ends of the output
range: what it must refuse and what it must accept, on a one-element int8 GEMM whose result is set by
its scale."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import assert_gemm_close

BF16_MAX = torch.finfo(torch.bfloat16).max


def _one(result: float, out: float, xs: float = 1.0):
    """``assert_gemm_close`` for 1 x 1 x 1: acc = 127 * 127, an fp32 ``xs`` and ``ws`` such that the float64
    result is ``result``."""
    q = torch.full((1, 1), 127, dtype=torch.int8)
    assert_gemm_close(torch.tensor([[out]], dtype=torch.bfloat16), q, torch.tensor([[xs]]), q,
                      torch.tensor([[result / (127 * 127 * xs)]], dtype=torch.float64), exact_acc=True)


def test_in_range_results_are_held_to_the_bound():
    _one(3.0, 3.0)
    with pytest.raises(AssertionError, match="outside the float64 bound"):
        _one(3.0, 3.5)
    with pytest.raises(AssertionError, match="outside the float64 bound"):
        _one(3.0, float("inf"))  # an overflow where there is none


def test_a_result_far_beyond_the_range_must_be_inf():
    _one(BF16_MAX * 1.1, float("inf"))
    _one(-BF16_MAX * 1.1, float("-inf"))
    with pytest.raises(AssertionError, match="not \\+-Inf"):
        _one(BF16_MAX * 1.1, BF16_MAX)
    with pytest.raises(AssertionError, match="not \\+-Inf"):
        _one(BF16_MAX * 1.1, float("-inf"))  # the wrong sign


def test_a_result_at_the_range_limit_may_round_either_way():
    edge = BF16_MAX * (1 + 2.0**-10)  # within the bound of the limit: RN may give the max or Inf
    _one(edge, float("inf"))
    _one(edge, BF16_MAX)
    with pytest.raises(AssertionError):
        _one(edge, float("-inf"))


def test_an_fp32_first_product_past_fp32_may_overflow():
    """acc * xs beyond fp32's range overflows in the spec's epilogue order even when ws brings the
    float64 result back in range: Inf is accepted there, as is the in-range value of other orders."""
    xs = 3e38  # an fp32 activation scale: acc * xs = 4.8e42 > FLT_MAX
    _one(2.0, float("inf"), xs=xs)
    _one(2.0, 2.0, xs=xs)
    with pytest.raises(AssertionError, match="outside the float64 bound"):
        _one(2.0, 3.0, xs=xs)


def _fp8_one(result: float, out: float, bias: float | None = None):
    """``assert_gemm_close`` with ``exact_acc=False`` (the FP8 bound) for 1 x 1 x 1: x = w = 1.0 in e4m3fn, scales
    such that the float64 product is ``result``; a bf16 output (and bias)."""
    one = torch.ones(1, 1).to(torch.float8_e4m3fn)
    b = None if bias is None else torch.tensor([bias], dtype=torch.bfloat16)
    assert_gemm_close(torch.tensor([[out]], dtype=torch.bfloat16), one, torch.tensor([[1.0]]), one,
                      torch.tensor([[result]], dtype=torch.float64), b, exact_acc=False)


def test_one_rounding_is_held_to_half_an_ulp():
    """An int8 result without bias is one rounding to bf16 of an exact product: the next bf16 above the right one
    is refused (3.0's ulp is 2^-6), which a bound of a whole ulp per rounding let through."""
    _one(3.0, 3.0)
    _one(3.0 + 2.0**-8, 3.0)  # rounds down to 3.0: within half an ulp
    with pytest.raises(AssertionError, match="outside the float64 bound"):
        _one(3.0, 3.0 + 2.0**-6)


def test_the_fp8_bound_allows_a_whole_ulp_per_rounding_twice_and_no_more():
    """The FP8 bound (any accumulation order, the scales in either order, a rounding more): a whole ulp for each of
    the output's two roundings, twice (less failed on an H100, benchmarks/RESULTS.md, forty-ninth round). At
    3.0 without a bias that is 0.094: 3.0625 passes (four ulps of 2^-6), 3.125 does not, nor does a relative error
    of 2^-4; with a bias of 1.0 (4.0, ulp 2^-5), 4.0625 passes and 4.125 does not."""
    _fp8_one(3.0, 3.0)
    _fp8_one(3.0, 3.0 + 2.0**-5)
    _fp8_one(3.0, 3.0 + 2.0**-4)
    for wrong in (3.0 + 2.0**-3, 3.0 - 2.0**-3, 3.0 * (1 + 2.0**-4)):
        with pytest.raises(AssertionError, match="outside the float64 bound"):
            _fp8_one(3.0, wrong)
    _fp8_one(3.0, 4.0 + 2.0**-4, bias=1.0)
    with pytest.raises(AssertionError, match="outside the float64 bound"):
        _fp8_one(3.0, 4.0 + 2.0**-3, bias=1.0)


def test_the_fp8_bound_is_the_same_for_a_negative_scale():
    """``quant_gemm`` reads no scale values, so a negative one reaches the oracle: its bound is a magnitude (the
    product's scale made it negative, which refused every element, the right ones too). The mirror of the positive
    case: -3.0625 passes, -3.125 does not."""
    _fp8_one(-3.0, -3.0)
    _fp8_one(-3.0, -3.0 - 2.0**-4)
    for wrong in (-3.0 - 2.0**-3, 3.0):
        with pytest.raises(AssertionError, match="outside the float64 bound"):
            _fp8_one(-3.0, wrong)
    # fp32 out over K = 37, where the accumulation's share of the bound outweighs the roundings': a negative scale
    # made the bound negative, and the float64 result itself was refused
    ones = torch.ones(1, 37).to(torch.float8_e4m3fn)
    for ws in (3.0 / 37, -3.0 / 37):
        ws64 = torch.tensor([[ws]], dtype=torch.float64)
        right = (37 * ws64).to(torch.float32)
        assert_gemm_close(right, ones, torch.tensor([[1.0]]), ones, ws64, exact_acc=False)
        with pytest.raises(AssertionError, match="outside the float64 bound"):
            assert_gemm_close(right * 1.001, ones, torch.tensor([[1.0]]), ones, ws64, exact_acc=False)


@pytest.mark.parametrize("exact_acc", [True, False])
def test_k_zero_is_the_bias_alone(exact_acc):
    """K = 0: every dot is 0, so the output is the bias (or 0); the oracle read [M, 0] as rows of -1 x 0 and
    raised torch's reshape error instead of judging."""
    dtype = torch.int8 if exact_acc else torch.float8_e4m3fn
    xq, wq = torch.zeros(2, 0).to(dtype), torch.zeros(3, 0).to(dtype)
    xs, ws, bias = torch.ones(2, 1), torch.ones(3, 1), torch.tensor([0.0, 1.0, 2.0], dtype=torch.bfloat16)
    assert_gemm_close(bias.expand(2, 3).clone(), xq, xs, wq, ws, bias, exact_acc=exact_acc)
    assert_gemm_close(torch.zeros(2, 3, dtype=torch.bfloat16), xq, xs, wq, ws, exact_acc=exact_acc)
    with pytest.raises(AssertionError, match="outside the float64 bound"):
        assert_gemm_close(torch.zeros(2, 3, dtype=torch.bfloat16), xq, xs, wq, ws, bias, exact_acc=exact_acc)
