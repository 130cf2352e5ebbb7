"""The selftest fails where a producer is wrong: faults put into what the producers return (the torch backend's
producers are the reference, so a correct node passes every check; these show each check compares)."""

from __future__ import annotations

import types

import pytest
import torch

from fused_quant import keys as K
from fused_quant import selftest
from fused_quant.selftest_vectors import VECTORS


def _run_with(monkeypatch, fault) -> list[selftest.CheckResult]:
    """The whole suite on the CPU with ``fault(act, x, q, s) -> (q, s)`` applied to every producer output."""
    real = selftest._run

    def run(act, x, key, scale, numerics, backend):
        q, s = real(act, x, key, scale, numerics, backend)
        return fault(act, x, q, s)

    monkeypatch.setattr(selftest, "_run", run)
    return selftest.run_selftest("torch", torch.device("cpu"))


def _flip_last_code(act, x, q, s):
    bits = q.view(torch.uint8).clone()
    bits.view(-1)[-1] ^= 1  # one code of the output, FP8 or int8
    return bits.view(q.dtype), s


def _flip_first_scale_bit(act, x, q, s):
    bits = s.view(torch.int32).clone()
    bits.view(-1)[0] ^= 1  # the lowest mantissa bit of one scale
    return q, bits.view(torch.float32)


def _suite() -> list[selftest.Check]:
    return list(selftest.checks("torch", torch.device("cpu")))


def test_a_wrong_code_fails_every_producer_check(monkeypatch):
    results = _run_with(monkeypatch, _flip_last_code)
    assert len(results) == len(_suite()) > 80
    gemms = [r for r in results if r.kind == selftest.FLOAT64]
    assert len(gemms) == 4 * len(K.KEYS) and all(r.ok for r in gemms)  # the GEMMs do not read a producer's output
    results = [r for r in results if r.kind != selftest.FLOAT64]
    assert not any(r.ok for r in results), [r.name for r in results if r.ok]
    for r in results:
        want = "q = " if r.kind == selftest.KNOWN_ANSWER else "q: 1/"
        assert r.detail.startswith(want) or "up=" in r.detail and "q: 1/" in r.detail, (r.name, r.detail)
    fp8 = [r for r in results if r.kind == selftest.KNOWN_ANSWER and "fp8" in r.name]
    assert fp8, "the FP8 known answers are compared too"


def test_a_wrong_scale_bit_fails_the_checks_that_read_scales(monkeypatch):
    results = _run_with(monkeypatch, _flip_first_scale_bit)
    by_name = {r.name: r for r in results}
    for v in VECTORS:
        if v.fp8 != "e4m3fn" and v.key.startswith("fp8"):  # another node's format
            assert f"known answer: {v.name}" not in by_name
            continue
        r = by_name[f"known answer: {v.name}"]
        if v.scale_bits is None:  # a vector that gives codes only
            assert r.ok, (r.name, r.detail)
        else:
            assert not r.ok and r.detail.startswith("scale bits = "), (r.name, r.detail)
    sweeps = [r for r in results if r.kind == selftest.REFERENCE]  # (the GEMM checks read no producer's scale)
    assert len(sweeps) == sum(c.kind == selftest.REFERENCE for c in _suite())
    assert all(not r.ok and "scale: 1/" in r.detail for r in sweeps), [(r.name, r.detail) for r in sweeps if r.ok]


def test_each_up_value_of_the_silu_sweeps_is_compared(monkeypatch):
    """A fault only where every up value is +Inf (the last of UP_VALUES): the silu_and_mul sweeps fail, there."""
    def at_inf_up(act, x, q, s):
        if act == "silu_and_mul" and x.shape[-1] == 2 * selftest.ROW and bool(torch.isinf(x[:, -1]).all()):
            return _flip_last_code(act, x, q, s)
        return q, s

    results = _run_with(monkeypatch, at_inf_up)
    silu = [r for r in results if r.name.startswith("sweep silu_and_mul")]
    assert len(silu) == 2 * len(K.KEYS) * 2  # two 16-bit types x keys x numerics profiles
    assert all(not r.ok and r.detail.startswith("up=inf: q: 1/") for r in silu), [r.detail for r in silu]
    assert all(r.ok for r in results if r not in silu)


def test_a_check_that_raises_is_a_failure_with_its_error(monkeypatch):
    def raising(act, x, q, s):
        if act == "relu2":
            raise ValueError("the kernel fell over")
        return q, s

    results = _run_with(monkeypatch, raising)
    relu = [r for r in results if "relu2" in r.name]
    assert relu and all(not r.ok and r.detail == "raised ValueError: the kernel fell over" for r in relu)
    assert all(r.ok for r in results if "relu2" not in r.name)


def test_a_gemm_that_drops_the_last_blocks_tail_fails_the_gemm_checks(monkeypatch):
    """The GEMM checks' N is no multiple of a kernel's 64- or 128-row blocks: a kernel that left the last block's rows
    past a multiple of 64 unwritten (a wrong N mask) fails every one."""
    assert selftest.GEMM_N % 64 and not selftest.GEMM_N % 16
    real = selftest.quant_gemm

    def tail_dropped(*a, **kw):
        out = real(*a, **kw)
        out[..., selftest.GEMM_N // 64 * 64:] = 0
        return out

    monkeypatch.setattr(selftest, "quant_gemm", tail_dropped)
    gemms = [r for r in selftest.run_selftest("torch", torch.device("cpu")) if r.kind == selftest.FLOAT64]
    assert gemms and all(not r.ok and "outside the float64 bound" in r.detail for r in gemms), gemms


def test_a_gemm_off_by_a_little_fails_the_gemm_checks_only(monkeypatch):
    """A GEMM whose output is off by 10% (a wrong scale or a dropped block of K is more): every GEMM check fails,
    naming the bound, and no producer check does."""
    real = selftest.quant_gemm
    monkeypatch.setattr(selftest, "quant_gemm", lambda *a, **kw: real(*a, **kw) * 1.1)
    results = selftest.run_selftest("torch", torch.device("cpu"))
    gemms = [r for r in results if r.kind == selftest.FLOAT64]
    assert gemms and all(not r.ok and "outside the float64 bound" in r.detail for r in gemms), gemms
    assert all(r.ok for r in results if r.kind != selftest.FLOAT64)


def test_a_kernel_fault_seen_at_the_synchronize_fails_its_own_check(monkeypatch):
    """A GPU kernel's fault shows at the next synchronize, after its check returned: it fails that check, named,
    and the run goes on (it was a traceback that ended the run with no check named)."""
    ran = []
    suite = [selftest.Check(f"check {i}", selftest.REFERENCE, lambda i=i: ran.append(i) or "") for i in range(3)]
    monkeypatch.setattr(selftest, "checks", lambda backend, device: iter(suite))

    def synchronize(device=None):
        if ran == [0, 1]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    results = selftest.run_selftest("triton_fp8", torch.device("cuda"))
    assert ran == [0, 1, 2] and [r.ok for r in results] == [True, False, True]
    assert results[1].detail == "raised RuntimeError: CUDA error: an illegal memory access was encountered"


def test_gemm_checks_ask_the_providers_a_layer_would(monkeypatch):
    """The node's own backend is asked as a layer's call asks (no backend named: its providers, then torch's); another
    backend, under ``--backend``, its own providers and then torch's, as if it were selected; where every one
    refuses, the check fails with both refusals."""
    from fused_quant.errors import BackendUnavailableError

    asked = []

    def quant_gemm(qa, w, ws, b, *, out_dtype, backend=None):
        asked.append(backend)
        if backend == "triton_fp8" or refuse_torch and backend == "torch":
            raise BackendUnavailableError(f"no provider in {backend}")
        return torch.zeros(qa.data.shape[0], w.shape[0], dtype=out_dtype)

    monkeypatch.setattr(selftest, "quant_gemm", quant_gemm)
    refuse_torch = False
    qa, w = types.SimpleNamespace(data=torch.zeros(2, 8)), torch.zeros(4, 8)
    selftest._node_gemm(qa, w, None, None, torch.bfloat16, "torch")  # the node's backend (torch on this CPU)
    assert asked == [None]
    asked.clear()
    assert selftest._node_gemm(qa, w, None, None, torch.bfloat16, "triton_fp8").shape == (2, 4)
    assert asked == ["triton_fp8", "torch"]
    refuse_torch = True
    with pytest.raises(BackendUnavailableError, match="^no provider in triton_fp8; then torch: no provider in torch$"):
        selftest._node_gemm(qa, w, None, None, torch.bfloat16, "triton_fp8")
