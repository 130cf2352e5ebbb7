"""Conformance of one backend's producers on this node: known answers and bitwise sweeps.

Every check runs the backend's fused producer (``fused_act_quant(..., backend=)``,
which never falls back) and compares it, bit for bit, either with hand-written known
answers (``selftest_vectors``, independent of the reference) or with ``reference.py`` on
the same device: all 65,536 bf16 patterns through relu2 for every key and several scales,
all gate patterns against a set of up values for silu_and_mul, and per-token rows with
adversarial content, for both numerics profiles.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch

from fused_quant import keys as K
from fused_quant import selection
from fused_quant.reference import act_quant_ref
from fused_quant.registry import fused_act_quant, platform_fp8_dtype
from fused_quant.selftest_vectors import VECTORS, KnownAnswer

STATIC_SCALES = (1.0, 0.37, 1.0e-3, 3.0e4)
UP_VALUES = (0.0, 1.0, -1.0, 3.140625, "max", "tiny", float("nan"), float("inf"))  # "max" / "tiny": of the dtype
ROW = 256  # the 65,536 patterns as [256, 256] rows for per-token keys
# the two kinds of check: against hand-written answers, against reference.py
KNOWN_ANSWER, REFERENCE = "known answer", "reference"


class Check(NamedTuple):
    name: str
    kind: str  # KNOWN_ANSWER or REFERENCE
    run: Callable[[], str]  # '' when it passes, else what differs


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


def _compare(got, want) -> str:
    """'' when bitwise equal, else a short description of the first differences."""
    (q, s), (rq, rs) = got, want
    for what, a, b in (("q", q, rq), ("scale", s, rs)):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{what}: {a.dtype}{tuple(a.shape)} != {b.dtype}{tuple(b.shape)}"
        diff = _bits(a) != _bits(b)
        if bool(diff.any()):
            i = diff.reshape(-1).nonzero()[0].item()
            return (f"{what}: {int(diff.sum())}/{a.numel()} differ, first at flat index {i}: "
                    f"got {_bits(a).reshape(-1)[i].item()}, want {_bits(b).reshape(-1)[i].item()}")
    return ""


def _run(act, x, key, scale, numerics, backend):
    qa = fused_act_quant(act, x, key, scale, numerics=numerics, backend=backend)
    return qa.data, qa.scale


def _check_against_reference(act, x, key, scale, numerics, backend) -> str:
    got = _run(act, x, key, scale, numerics, backend)
    want = act_quant_ref(act, x, key, scale, numerics=numerics, fp8_dtype=platform_fp8_dtype())
    return _compare(got, want)


def _known_answer(v: KnownAnswer, backend: str, device) -> str:
    dtype = getattr(torch, v.dtype)
    x = torch.tensor(v.rows, dtype=dtype, device=device)
    key = K.KEYS[v.key]
    scale = torch.tensor([v.scale], dtype=torch.float32, device=device) if v.scale is not None else None
    q, s = _run(v.act, x, key, scale, v.numerics, backend)
    if K.is_fp8(key) and q.dtype != torch.float8_e4m3fn:
        return f"known answers are e4m3fn codes; this node quantizes to {q.dtype}"
    got = (q.view(torch.uint8) if K.is_fp8(key) else q).cpu().tolist()
    if got != [list(r) for r in v.q]:
        return f"q = {got}, want {[list(r) for r in v.q]}"
    if v.scale_bits is not None:
        sb = [b & 0xFFFFFFFF for b in s.view(torch.int32).reshape(-1).cpu().tolist()]
        if sb != list(v.scale_bits):
            return f"scale bits = {[hex(b) for b in sb]}, want {[hex(b) for b in v.scale_bits]}"
    return ""


def skipped() -> dict[str, str]:
    """The known answers this node cannot check, by name, with why: the FP8 vectors' expected bytes are e4m3fn
    codes, and a node that quantizes to e4m3fnuz (gfx942) makes other bytes (its own FP8 paths are still
    compared with the reference)."""
    fp8 = platform_fp8_dtype()
    if fp8 == torch.float8_e4m3fn:
        return {}
    why = f"their expected bytes are e4m3fn codes; this node quantizes to {fp8}"
    return {f"known answer: {v.name}": why for v in VECTORS if K.is_fp8(K.KEYS[v.key])}


def checks(backend: str, device: torch.device) -> Iterator[Check]:
    """Every check of the suite, in order (but the ``skipped`` ones)."""
    left_out = skipped()
    for v in VECTORS:
        if f"known answer: {v.name}" in left_out:
            continue
        yield Check(f"known answer: {v.name}", KNOWN_ANSWER, lambda v=v: _known_answer(v, backend, device))
    patterns = all_bf16_patterns(device)
    for key_name, key in K.KEYS.items():
        scales = STATIC_SCALES if K.is_static(key) else (None,)
        x = patterns if K.is_static(key) else patterns.reshape(ROW, -1)
        for sc in scales:
            scale = torch.tensor([sc], dtype=torch.float32, device=device) if sc is not None else None
            label = f" scale={sc}" if sc is not None else ""
            yield Check(f"sweep relu2 -> {key_name}{label}: 65,536 bf16 patterns", REFERENCE,
                        lambda x=x, key=key, scale=scale:
                        _check_against_reference("relu2", x, key, scale, "default", backend))
    for dtype in (torch.bfloat16, torch.float16):  # every gate pattern of each 16-bit type
        gates = patterns.view(dtype).reshape(ROW, ROW)
        for key_name, key in K.KEYS.items():
            scale = torch.tensor([0.37], dtype=torch.float32, device=device) if K.is_static(key) else None
            for numerics in ("default", "hcu"):
                def silu_sweep(gates=gates, key=key, scale=scale, numerics=numerics) -> str:
                    for up in UP_VALUES:
                        if isinstance(up, str):
                            up = getattr(torch.finfo(gates.dtype), up)
                        x = torch.cat([gates, torch.full_like(gates, up)], dim=-1)
                        bad = _check_against_reference("silu_and_mul", x, key, scale, numerics, backend)
                        if bad:
                            return f"up={up}: {bad}"
                    return ""
                yield Check(f"sweep silu_and_mul -> {key_name} [{numerics}]: 65,536 {str(dtype)[6:]} gates x "
                            f"{len(UP_VALUES)} ups", REFERENCE, silu_sweep)
    for dtype in (torch.bfloat16, torch.float16):
        rows = adversarial_rows(1024, dtype, device)
        for key_name, key in K.KEYS.items():
            if K.is_static(key):
                continue
            for act in ("relu2", "silu_and_mul"):
                for numerics in ("default", "hcu"):
                    yield Check(f"adversarial rows {act} -> {key_name} {str(dtype)[6:]} [{numerics}]", REFERENCE,
                                lambda rows=rows, key=key, act=act, numerics=numerics:
                                _check_against_reference(act, rows, key, None, numerics, backend))


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
        except Exception as exc:  # a crash is a failed check, reported with its type
            detail = f"raised {type(exc).__name__}: {exc}"
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        results.append(CheckResult(check.name, not detail, detail, time.perf_counter() - t0, check.kind))
        if finished is not None:
            finished(i, len(suite), results[-1])
    return results


def summary(results: list[CheckResult], backend: str) -> dict[str, dict[str, object]]:
    """Per kind of check: how many passed, of how many, how many were skipped and why (``skipped``, the known
    answers' only), and what passing shows on ``backend``."""
    if backend == selection.FALLBACK:  # its producers are reference.py: the sweeps compare it with itself
        vs_reference = (f"the {backend} backend's producers are reference.py, so these compare the reference "
                        "with itself: they show it runs on this device, not that it is right (the known "
                        "answers show that)")
    else:
        vs_reference = f"{backend}'s producers bit for bit against fused_quant/reference.py on the same device"
    meanings = {KNOWN_ANSWER: "hand-written expected bytes and scale bits (fused_quant/selftest_vectors.py, "
                              "from docs/NUMERICS.md), independent of reference.py",
                REFERENCE: vs_reference}
    left_out = skipped()
    whys = sorted(set(left_out.values()))
    return {kind: {"passed": sum(r.ok for r in results if r.kind == kind),
                   "total": sum(r.kind == kind for r in results),
                   "skipped": len(left_out) if kind == KNOWN_ANSWER else 0,
                   "skipped_why": "; ".join(whys) if kind == KNOWN_ANSWER else "", "meaning": meaning}
            for kind, meaning in meanings.items()}
