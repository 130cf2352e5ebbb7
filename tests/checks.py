"""Helpers shared by the CPU test files (to be folded into tests/helpers.py / conftest.py).

``assert_gemm_matches``: ``tests.helpers.assert_gemm_close`` plus agreement of non-finite
outputs; ``assert_gemm_close`` alone compares ``err > tol``, which is False for NaN, so a NaN
output passes against a finite reference and -Inf passes against +Inf.
``one_thread``: CPU tests run on small tensors, where intra-op threads only add contention
(on a loaded 2-core node a 65,536-element op went from 0.02 ms to 2-8 ms with 2 threads).
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers import assert_gemm_close, gemm_ref_f64


def assert_gemm_matches(out: torch.Tensor, xq, xs, wq, ws, bias=None, *, exact_acc: bool,
                        what: str = "gemm") -> None:
    """Float64 bound where the reference is finite; same NaN positions and same infinities elsewhere."""
    ref = gemm_ref_f64(xq, xs, wq, ws, bias)
    o = out.detach().cpu().to(torch.float64)
    assert o.shape == ref.shape, f"{what}: shape {tuple(o.shape)} != {tuple(ref.shape)}"
    nan_o, nan_r = torch.isnan(o), torch.isnan(ref)
    assert torch.equal(nan_o, nan_r), (f"{what}: NaN where the reference has none at "
                                       f"{(nan_o & ~nan_r).nonzero()[:5].tolist()}, or the reverse at "
                                       f"{(nan_r & ~nan_o).nonzero()[:5].tolist()}")
    inf_r = torch.isinf(ref)
    assert torch.equal(o[inf_r], ref[inf_r]), f"{what}: infinities of the reference not reproduced"
    # elements with a finite reference get the float64 bound (non-finite ones compare False there)
    assert_gemm_close(out, xq, xs, wq, ws, bias, exact_acc=exact_acc, what=what)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
