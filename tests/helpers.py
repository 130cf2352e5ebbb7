"""Shared test helpers: bitwise comparison, the float64 GEMM reference, adversarial inputs."""

from __future__ import annotations

import torch

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype in FP8_DTYPES:
        return t.view(torch.uint8)
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16)
    return t


def assert_bits_equal(actual: torch.Tensor, expected: torch.Tensor, what: str = "tensor") -> None:
    """Zero-tolerance equality: FP8 as uint8, floats as their bit patterns, ints as ints."""
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a, e = _bits(actual).cpu(), _bits(expected).cpu()
    diff = a != e
    if diff.any():
        idx = diff.nonzero()[:5].tolist()
        n = int(diff.sum())
        samples = [(i, a[tuple(i)].item(), e[tuple(i)].item()) for i in idx]
        raise AssertionError(f"{what}: {n}/{a.numel()} elements differ; first (index, got, want): {samples}")


def gemm_ref_f64(xq, xs, wq, ws, bias=None) -> torch.Tensor:
    """float64 ``(xq @ wq.T) * xs * ws + bias`` on the CPU: the GEMM oracle."""
    x = xq.cpu().to(torch.float64).reshape(-1, xq.shape[-1])
    w = wq.cpu().to(torch.float64)
    out = (x @ w.T) * xs.cpu().to(torch.float64).reshape(-1, 1) * ws.cpu().to(torch.float64).reshape(1, -1)
    if bias is not None:
        out = out + bias.cpu().to(torch.float64)
    return out.reshape(*xq.shape[:-1], wq.shape[0])


def assert_close_to_f64(out: torch.Tensor, ref: torch.Tensor, *, ulps: float = 1.0, what: str = "gemm") -> None:
    """|out - ref| <= ulps * eps(out dtype) * max(|ref|, tiny) elementwise (+ rounding of the output)."""
    eps = torch.finfo(out.dtype).eps
    o = out.cpu().to(torch.float64)
    tol = ulps * eps * ref.abs().clamp_min(torch.finfo(out.dtype).tiny) + 1e-30
    bad = (o - ref).abs() > tol
    assert not bad.any(), (f"{what}: {int(bad.sum())}/{o.numel()} outside {ulps} ulp of the float64 reference; "
                           f"max abs err {float((o - ref).abs().max()):.3e}")


def all_bf16_patterns(device="cpu") -> torch.Tensor:
    """Every one of the 65,536 bf16 bit patterns (NaNs, infs, denormals, +-0 included)."""
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).to(device)


def adversarial_rows(d: int, dtype: torch.dtype, device="cpu", seed: int = 0) -> torch.Tensor:
    """Rows of width d: all-zero, one huge value, NaN, +Inf, -Inf, denormals, max, random."""
    g = torch.Generator().manual_seed(seed)
    fi = torch.finfo(dtype)
    rows = torch.randn(9, d, generator=g).to(dtype)
    rows[0] = 0
    rows[1, d // 2] = fi.max / 2
    rows[2, d // 3] = float("nan")
    rows[3, 0] = float("inf")
    rows[4, -1] = float("-inf")
    rows[5] = fi.tiny / 4 if dtype != torch.float32 else fi.tiny / 8  # denormals only
    rows[6] = fi.max
    rows[7] = -fi.max
    return rows.to(device)
