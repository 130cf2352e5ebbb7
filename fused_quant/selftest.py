"""Conformance of one backend's producers on this node: known answers and bitwise sweeps.

Every check runs the backend's fused producer (``fused_act_quant(..., backend=)``,
which never falls back) and compares it, bit for bit, either with hand-written known
answers (``selftest_vectors``, independent of the reference; those of the node's FP8
format) or with ``reference.py`` on the same device: all 65,536 bf16 and fp16 patterns
through identity and relu2 for every key and several scales (some of which tell a division from
a product with the rounded reciprocal), all gate patterns against a set of up values
for silu_and_mul, and per-token rows with adversarial content, for both numerics
profiles. Then GEMMs through the checked entry (``quant_gemm``: the provider the
backend's chain picks on this node) against float64, within the test suite's bound
(``reference.gemm_outside_bound``). FP8 checks are skipped, with the reason, where the
backend has no FP8 on this node (an int8-only arch), and a kind's GEMM checks where
FUSED_QUANT_DISABLED_GEMMS leaves it no provider (the node's calls refuse it then).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch

from fused_quant import keys as K
from fused_quant import selection
from fused_quant.contract import QuantizedActivation
from fused_quant.errors import BackendUnavailableError
from fused_quant.gemm import kinds_left_without_gemms, kinds_without_gemms, quant_gemm
from fused_quant.reference import act_quant_ref, gemm_outside_bound, quantize_weight_ref
from fused_quant.registry import fused_act_quant, platform_fp8_dtype, platform_has_fp8, platform_label
from fused_quant.selftest_vectors import VECTORS, KnownAnswer

# 0.3 and 0.9: scales at which a quotient and a product with the rounded reciprocal give other codes for some
# of the 65,536 inputs (bf16: int8 4-13 of them, FP8 1-30; fp16: int8 3-20, FP8 0-30; each pair of input dtype and
# activation has one of the two where they differ), so the sweeps see which one a producer computes; the others
# span the exponent range
STATIC_SCALES = (1.0, 0.37, 0.3, 0.9, 1.0e-3, 3.0e4)
SILU_STATIC_SCALE = 0.9
UP_VALUES = (0.0, 1.0, -1.0, 3.140625, "max", "tiny", float("nan"), float("inf"))  # "max" / "tiny": of the dtype
ROW = 256  # the 65,536 patterns as [256, 256] rows for per-token keys
# the kinds of check: against hand-written answers, against reference.py, GEMMs against float64
KNOWN_ANSWER, REFERENCE, FLOAT64 = "known answer", "reference", "float64"
# the GEMM checks' problems: M tokens (one, a decode batch, past the small-M buckets) x N x K, with a bias and fp16 out
# at 16 tokens; N a multiple of 16 (cuBLASLt's FP8 layouts) but not of a kernel's 32- to 256-row blocks, so the
# last block's rows past N are masked
GEMM_MS, GEMM_N, GEMM_K = (1, 16, 300), 272, 512


class Check(NamedTuple):
    name: str
    kind: str  # KNOWN_ANSWER, REFERENCE or FLOAT64
    run: Callable[[], str]  # '' when it passes, else what differs
    skip: str = ""  # why this node cannot run it ('' where it runs)


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str
    seconds: float
    kind: str = REFERENCE

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "kind": self.kind, "ok": self.ok, "detail": self.detail,
                "seconds": round(self.seconds, 3)}


def all_bf16_patterns(device="cpu") -> torch.Tensor:
    """Every one of the 65,536 bf16 bit patterns (NaNs, infs, denormals, +-0 included)."""
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).to(device)


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        return t.view(torch.uint8)
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def _value(t: torch.Tensor, i: int) -> str:
    """Element ``i`` of ``t`` (flat) as a value, with its bits where it is an FP8 code or a float32 scale."""
    v = t.reshape(-1)[i : i + 1]
    if t.dtype == torch.int8:
        return repr(v.item())
    mask = 0xFFFFFFFF if t.dtype == torch.float32 else 0xFF
    return f"{v.float().item()!r} ({hex(_bits(v).item() & mask)})"


def _compare(got, want, inputs: Callable[[int, int], str] | None = None) -> str:
    """'' when bitwise equal, else a short description of the first difference: the output element, got and want,
    and (``inputs(row, col)``) the input values it came from."""
    (q, s), (rq, rs) = got, want
    for what, a, b in (("q", q, rq), ("scale", s, rs)):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{what}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        diff = _bits(a) != _bits(b)
        if bool(diff.any()):
            i = diff.reshape(-1).nonzero()[0].item()
            width = q.shape[-1] if q.dim() else 1
            row, col = (i // width, i % width) if what == "q" else (i, None)
            where = f" (row {row}{'' if col is None else f', column {col}'})" if q.dim() > 1 else ""
            came = f"; input {inputs(row, col)}" if inputs is not None and (col is not None or q.dim() > 1) else ""
            return (f"{what}: {int(diff.sum())}/{a.numel()} differ, first at flat index {i}{where}: "
                    f"got {_value(a, i)}, want {_value(b, i)}{came}")
    return ""


def _run(act, x, key, scale, numerics, backend):
    qa = fused_act_quant(act, x, key, scale, numerics=numerics, backend=backend)
    return qa.data, qa.scale


def _inputs(act: str, x: torch.Tensor, scale) -> Callable[[int, int], str]:
    """``inputs(row, col)`` for ``_compare``: the input element(s) output ``[row, col]`` came from (a gate and its
    up for silu_and_mul; the whole row's values set a per-token scale), and the static scale."""
    rows = x.reshape(-1, x.shape[-1]) if x.dim() else x.reshape(1, 1)
    d = rows.shape[-1] // 2 if act == "silu_and_mul" else rows.shape[-1]
    with_scale = f", scale {scale.item()!r}" if scale is not None else ""

    def inputs(row: int, col: int | None) -> str:
        if col is None:  # a per-token scale: every element of the row sets it
            return f"row {row} of {rows.shape[-1]} values, absmax {rows[row].float().abs().max().item()!r}"
        if act == "silu_and_mul":
            return f"gate {rows[row, col].item()!r}, up {rows[row, d + col].item()!r}{with_scale}"
        return f"{rows[row, col].item()!r}{with_scale}"

    return inputs


def _check_against_reference(act, x, key, scale, numerics, backend) -> str:
    got = _run(act, x, key, scale, numerics, backend)
    want = act_quant_ref(act, x, key, scale, numerics=numerics, fp8_dtype=platform_fp8_dtype())
    return _compare(got, want, _inputs(act, x, scale))


def _known_answer(v: KnownAnswer, backend: str, device) -> str:
    dtype = getattr(torch, v.dtype)
    x = torch.tensor(v.rows, dtype=dtype, device=device)
    key = K.KEYS[v.key]
    scale = torch.tensor([v.scale], dtype=torch.float32, device=device) if v.scale is not None else None
    q, s = _run(v.act, x, key, scale, v.numerics, backend)
    if K.is_fp8(key) and q.dtype != getattr(torch, f"float8_{v.fp8}"):
        return f"expected {v.fp8} codes; this node quantizes to {q.dtype}"
    got = (q.view(torch.uint8) if K.is_fp8(key) else q).cpu().tolist()
    if got != [list(r) for r in v.q]:
        return f"q = {got}, want {[list(r) for r in v.q]}"
    if v.scale_bits is not None:
        sb = [b & 0xFFFFFFFF for b in s.view(torch.int32).reshape(-1).cpu().tolist()]
        if sb != list(v.scale_bits):
            return f"scale bits = {[hex(b) for b in sb]}, want {[hex(b) for b in v.scale_bits]}"
    return ""


def _node_gemm(qa, wq, ws, b, out_dtype: torch.dtype, backend: str) -> torch.Tensor:
    """``quant_gemm`` as a layer's call runs it on a node whose backend is ``backend``: its providers, then the torch
    backend's where they all refuse (``gemm.select_gemm_provider``). The node's own backend is asked as its calls ask
    (no backend named); another one, that a ``--backend`` flag tests, as it would be with it selected."""
    try:
        node = selection.current_backend_name()
    except BackendUnavailableError:  # the variable names a backend this node cannot run (--backend tests another)
        node = None
    if backend == node:
        return quant_gemm(qa, wq, ws, b, out_dtype=out_dtype)
    try:
        return quant_gemm(qa, wq, ws, b, out_dtype=out_dtype, backend=backend)
    except BackendUnavailableError as own:
        if backend == selection.FALLBACK:
            raise
        try:
            return quant_gemm(qa, wq, ws, b, out_dtype=out_dtype, backend=selection.FALLBACK)
        except BackendUnavailableError as fallback:
            raise BackendUnavailableError(f"{own}; then {selection.FALLBACK}: {fallback}") from None


def _gemm(key, m: int, bias: bool, out_dtype: torch.dtype, backend: str, device) -> str:
    """One GEMM through the checked entry (``quant_gemm``: the provider ``backend``'s chain picks on this node, as a
    layer's call would, ``_node_gemm``) on fresh random codes and scales, against float64 within the test suite's
    bound."""
    fp8 = platform_fp8_dtype()
    dtype = torch.int8 if not K.is_fp8(key) else fp8
    g = torch.Generator().manual_seed(1000 * m + bias)
    wq, ws = quantize_weight_ref(torch.randn(GEMM_N, GEMM_K, generator=g), dtype)
    if dtype == torch.int8:
        xq = torch.randint(-127, 128, (m, GEMM_K), generator=g, dtype=torch.int8)
    else:
        xq = (torch.randn(m, GEMM_K, generator=g) * 64).clamp(-K.fp8_max(fp8), K.fp8_max(fp8)).to(fp8)
    xs = torch.rand(m, 1, generator=g) * 0.01 + 1e-3 if K.is_per_token(key) else torch.tensor([0.005])
    b = (torch.randn(GEMM_N, generator=g) * 4).to(out_dtype) if bias else None
    xq, xs, wq, ws = (t.to(device) for t in (xq, xs, wq, ws))
    b = b.to(device) if b is not None else None
    qa = QuantizedActivation(xq, xs, out_dtype, torch.Size((m, GEMM_K)), key)
    out = _node_gemm(qa, wq, ws, b, out_dtype, backend)
    if out.shape != (m, GEMM_N) or out.dtype != out_dtype:
        return f"out {out.dtype}{tuple(out.shape)}, expected {out_dtype}{(m, GEMM_N)}"
    return gemm_outside_bound(out, xq, xs, wq, ws, b, exact_acc=dtype == torch.int8)


def _for_this_node(v: KnownAnswer) -> bool:
    """Whether the node quantizes to the FP8 format ``v``'s codes are written in (int8 vectors: always)."""
    return not K.is_fp8(K.KEYS[v.key]) or getattr(torch, f"float8_{v.fp8}") == platform_fp8_dtype()


def _skip(key, backend: str) -> str:
    """Why ``backend`` cannot run ``key``'s checks on this node ('' where it can): an FP8 key where the node has
    no FP8 and the backend computes FP8 on the device (the torch backend emulates it)."""
    if K.is_fp8(key) and backend != selection.FALLBACK and not platform_has_fp8():
        return f"{platform_label()} has no FP8: {backend} runs int8 keys only here"
    return ""


def _gemm_skip(key, backend: str) -> str:
    """Why the GEMM checks of ``key`` do not run ('' where they do): ``_skip``'s reason, or FUSED_QUANT_DISABLED_GEMMS
    leaving ``backend``'s chain (then torch's, as ``_node_gemm`` asks them) no provider of the key's kind. Every such
    call of the node is refused, by the operator's choice; the selftest says so (``fused-quant selftest``'s warning
    line), as ``fused-quant probe`` does."""
    left_without = K.gemm_kind(key) in kinds_without_gemms(backend)
    return _skip(key, backend) or (kinds_left_without_gemms(backend) if left_without else "")


def checks(backend: str, device: torch.device) -> Iterator[Check]:
    """Every check this node runs, in order (``all_checks`` also yields those it leaves out, with why)."""
    return (c for c in all_checks(backend, device) if not c.skip)


def all_checks(backend: str, device: torch.device) -> Iterator[Check]:
    """Every check of the suite for this node's FP8 format, skipped ones included (``Check.skip``). Listing them makes
    no tensor: a check makes its inputs when it runs (the patterns and rows once, for every check that reads them)."""
    for v in VECTORS:
        if _for_this_node(v):
            yield Check(f"known answer: {v.name}", KNOWN_ANSWER, lambda v=v: _known_answer(v, backend, device),
                        _skip(K.KEYS[v.key], backend))
    patterns = functools.cache(lambda: all_bf16_patterns(device))
    rows = functools.cache(lambda dtype: adversarial_rows(1024, dtype, device))

    def scale_of(value: float | None) -> torch.Tensor | None:
        return None if value is None else torch.tensor([value], dtype=torch.float32, device=device)

    for dtype in (torch.bfloat16, torch.float16):  # every pattern of each 16-bit type
        for act in ("identity", "relu2"):
            for key_name, key in K.KEYS.items():
                for sc in STATIC_SCALES if K.is_static(key) else (None,):
                    label = f" scale={sc}" if sc is not None else ""

                    def sweep(act=act, dtype=dtype, key=key, sc=sc) -> str:
                        x = patterns().view(dtype) if K.is_static(key) else patterns().view(dtype).reshape(ROW, -1)
                        return _check_against_reference(act, x, key, scale_of(sc), "default", backend)
                    yield Check(f"sweep {act} -> {key_name}{label}: 65,536 {str(dtype)[6:]} patterns", REFERENCE,
                                sweep, _skip(key, backend))
    for dtype in (torch.bfloat16, torch.float16):  # every gate pattern of each 16-bit type
        for key_name, key in K.KEYS.items():
            for numerics in ("default", "hcu"):
                def silu_sweep(dtype=dtype, key=key, numerics=numerics) -> str:
                    gates = patterns().view(dtype).reshape(ROW, ROW)
                    scale = scale_of(SILU_STATIC_SCALE if K.is_static(key) else None)
                    for up in UP_VALUES:
                        if isinstance(up, str):
                            up = getattr(torch.finfo(gates.dtype), up)
                        x = torch.cat([gates, torch.full_like(gates, up)], dim=-1)
                        bad = _check_against_reference("silu_and_mul", x, key, scale, numerics, backend)
                        if bad:
                            return f"up={up}: {bad}"
                    return ""
                yield Check(f"sweep silu_and_mul -> {key_name} [{numerics}]: 65,536 {str(dtype)[6:]} gates x "
                            f"{len(UP_VALUES)} ups", REFERENCE, silu_sweep, _skip(key, backend))
    for dtype in (torch.bfloat16, torch.float16):
        for key_name, key in K.KEYS.items():
            if K.is_static(key):
                continue
            for act in ("identity", "relu2", "silu_and_mul"):
                for numerics in ("default", "hcu"):
                    yield Check(f"adversarial rows {act} -> {key_name} {str(dtype)[6:]} [{numerics}]", REFERENCE,
                                lambda dtype=dtype, key=key, act=act, numerics=numerics:
                                _check_against_reference(act, rows(dtype), key, None, numerics, backend),
                                _skip(key, backend))
    for key_name, key in K.KEYS.items():
        for m, bias, out_dtype in [(m, False, torch.bfloat16) for m in GEMM_MS] + [(16, True, torch.float16)]:
            extra = ", bias" if bias else ""
            yield Check(f"gemm {key_name} M={m} N={GEMM_N} K={GEMM_K}{extra} -> {str(out_dtype)[6:]}", FLOAT64,
                        lambda key=key, m=m, bias=bias, out_dtype=out_dtype:
                        _gemm(key, m, bias, out_dtype, backend, device), _gemm_skip(key, backend))


def adversarial_rows(d: int, dtype: torch.dtype, device="cpu", seed: int = 1234) -> torch.Tensor:
    """Ten rows of width d: all-zero, one huge value, NaN, +Inf, -Inf, denormals only, +max, -max,
    alternating -0, random."""
    g = torch.Generator().manual_seed(seed)
    fi = torch.finfo(dtype)
    rows = torch.randn(10, d, generator=g).to(dtype)
    rows[0] = 0  # all-zero row: scale 0 (int8) / the minimum scale (fp8)
    rows[1, d // 2] = fi.max / 2  # one huge value crushes the rest
    rows[2, d // 3] = float("nan")
    rows[3, 0] = float("inf")
    rows[4, -1] = float("-inf")
    rows[5] = fi.tiny / 4  # denormals only
    rows[6] = fi.max
    rows[7] = -fi.max
    rows[8, ::2] = -0.0
    return rows.to(device)


def run_selftest(backend: str, device: torch.device, *,
                 started: Callable[[int, int, str], None] | None = None,
                 finished: Callable[[int, int, CheckResult], None] | None = None) -> list[CheckResult]:
    """Run every check; ``started(i, total, name)`` and ``finished(i, total, result)`` report progress."""
    suite = list(checks(backend, device))
    results = []
    for i, check in enumerate(suite, 1):
        if started is not None:
            started(i, len(suite), check.name)
        t0 = time.perf_counter()
        try:
            detail = check.run()
            if device.type == "cuda":  # a kernel's fault surfaces here: it is this check's
                torch.cuda.synchronize(device)
        except Exception as exc:  # a crash is a failed check, reported with its type
            detail = f"raised {type(exc).__name__}: {exc}"
        results.append(CheckResult(check.name, not detail, detail, time.perf_counter() - t0, check.kind))
        if finished is not None:
            finished(i, len(suite), results[-1])
    return results


def summary(results: list[CheckResult], backend: str) -> dict[str, dict[str, object]]:
    """Per kind of check: how many passed, of how many, how many were skipped and why (``skipped``), and what
    passing shows on ``backend``."""
    if backend == selection.FALLBACK:  # its producers are reference.py: the sweeps compare it with itself
        vs_reference = (f"the {backend} backend's producers are reference.py, so these compare the reference "
                        "with itself: they show it runs on this device, not that it is right (the known "
                        "answers show that)")
    else:
        vs_reference = f"{backend}'s producers bit for bit against fused_quant/reference.py on the same device"
    meanings = {KNOWN_ANSWER: "hand-written expected bytes and scale bits (fused_quant/selftest_vectors.py, "
                              "from docs/NUMERICS.md), independent of reference.py",
                REFERENCE: vs_reference,
                FLOAT64: f"{backend}'s GEMMs through the checked entry (the provider its chain picks on this node) "
                         "against float64, within the test suite's bound"}
    left_out = [c for c in all_checks(backend, torch.device("cpu")) if c.skip]
    return {kind: {"passed": sum(r.ok for r in results if r.kind == kind),
                   "total": sum(r.kind == kind for r in results),
                   "skipped": sum(c.kind == kind for c in left_out),
                   "skipped_why": "; ".join(sorted({c.skip for c in left_out if c.kind == kind})), "meaning": meaning}
            for kind, meaning in meanings.items()}
