"""``hip_w8a8`` GEMM providers, in order: the vendor ``hipblaslt_w8a8_gemm`` (when a vendor
module provides it), the small-M Triton GEMM (where this arch's sweep measured it faster),
``torch._int_mm`` (hipBLASLt on ROCm) + epilogue, the Triton scaled int8 GEMM; FP8 the small-M
GEMM, then ``torch._scaled_mm``, where the arch has FP8.

Vendor call: ``hipblaslt_w8a8_gemm(xq [M,K], w [N,K], xs [M,1], ws [N,1], m, n, k, "NT",
out_dtype) -> (status, out)`` on contiguous operands (a C kernel reads ``xs[m]`` at ``xs_ptr + m``); success is
``status is True`` or an integer status 0. ``out`` is checked (contiguous ``[M, N]`` of ``out_dtype`` on the
operands' device) before the bias is added, which would broadcast a wrong shape or promote a wrong dtype.
"""

from __future__ import annotations

import importlib
import numbers

import torch

from fused_quant import runtime
from fused_quant.gemm import GemmProblem, output_mismatch, register_gemm_provider
from fused_quant.kernels import gemm_launch as g
from fused_quant.platforms import current_platform
from fused_quant.validation import GemmProviderError

BACKENDS = ("hip_w8a8",)
# Modules that ship the vendor GEMM on DCU / ROCm nodes, tried in order (data).
VENDOR_MODULES = ("lightop.gemm_ops", "lmslim.quant_ops")
VENDOR_FN = "hipblaslt_w8a8_gemm"
VENDOR_PROVIDER = "hipblaslt_w8a8"  # the provider's name, which FUSED_QUANT_DISABLED_GEMMS takes
_SKIP_IT = f"; FUSED_QUANT_DISABLED_GEMMS={VENDOR_PROVIDER} leaves it out of the chain"


def _find_vendor_gemm() -> tuple[object | None, str]:
    fn, why = None, []
    for name in VENDOR_MODULES:
        try:
            found = getattr(importlib.import_module(name), VENDOR_FN)
        except Exception as exc:  # noqa: BLE001  (ImportError, no such function, or a module that fails as it
            # loads, e.g. an OSError for a missing shared library: named in the reason, the chain goes on)
            why.append(f"{name}: {exc.__class__.__name__}: {exc}")
            continue
        if not callable(found):  # a placeholder for a function its build left out (None): the next module is asked
            why.append(f"{name}.{VENDOR_FN} is {type(found).__name__}, not a function")
            continue
        fn, why = found, [f"{name}.{VENDOR_FN}"]
        break
    return fn, "; ".join(why)


def vendor_gemm() -> tuple[object | None, str]:
    """(callable or None, where it came from / why not); imported lazily, once per runtime generation
    (``runtime.reset()`` looks again, e.g. after installing the vendor module)."""
    return runtime.once("hip_w8a8.vendor_gemm", _find_vendor_gemm)


def _vendor_supported(p: GemmProblem) -> tuple[bool, str]:
    fn, why = vendor_gemm()
    if fn is None:
        return False, f"no vendor {VENDOR_FN} ({why})"
    if p.device.type != "cuda":
        return False, f"{VENDOR_FN} needs a GPU tensor, got {p.device}"
    if p.out_dtype not in (torch.bfloat16, torch.float16):
        return False, f"{VENDOR_FN} writes bf16/fp16, {p.out_dtype} requested"
    return True, why


def _where() -> str:
    return vendor_gemm()[1]


def _vendor(xq, xs, w, ws, bias, out_dtype):
    fn, _ = vendor_gemm()
    m, k = xq.shape
    n = w.shape[0]
    xs2 = (xs.expand(m, 1) if xs.numel() == 1 else xs).contiguous()
    ws2 = (ws.expand(n, 1) if ws.numel() == 1 else ws).contiguous()
    try:
        result = fn(xq, w, xs2, ws2, m, n, k, "NT", out_dtype)
    except torch.OutOfMemoryError:  # as itself: callers back off on it, and disabling the provider is no cure
        raise
    except Exception as exc:  # a build of another signature, a HIP error: named, with the way around it
        raise GemmProviderError(f"{VENDOR_FN} ({_where()}) raised {type(exc).__name__}: {exc} (M={m}, N={n}, "
                                f"K={k}){_SKIP_IT}") from exc
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise GemmProviderError(f"{VENDOR_FN} ({_where()}) returned {type(result).__name__}, expected (status, out)"
                                f"{_SKIP_IT}")
    status, out = result
    if not (status is True or (isinstance(status, numbers.Integral) and not isinstance(status, bool)
                               and status == 0)):
        raise GemmProviderError(f"{VENDOR_FN} ({_where()}) failed with status {status!r} (M={m}, N={n}, K={k})"
                                f"{_SKIP_IT}")
    got = output_mismatch(out, (m, n), out_dtype, xq.device, contiguous=True)  # the entry's check, before the bias
    if got:
        raise GemmProviderError(f"{VENDOR_FN} ({_where()}) returned {got}, expected a contiguous ({m}, {n}) "
                                f"{out_dtype} on {xq.device}{_SKIP_IT}")
    return out if bias is None else out + bias



register_gemm_provider(VENDOR_PROVIDER, _vendor, kind="int8", backends=BACKENDS,
                       supported=_vendor_supported, first=False)
register_gemm_provider("small_m_int8", g.small_m_gemm, kind="int8", backends=BACKENDS,
                       supported=g.small_m_supported_in("hip_w8a8"), first=False, bind=g.bind_small_m,
                       bind_quantizing=g.bind_small_m_from_producer,
                       bind_producing=g.bind_small_m_producing)
register_gemm_provider("int_mm_int8", g.int_mm_int8, kind="int8", backends=BACKENDS,
                       supported=g.int_mm_supported, first=False, bind=g.bind_int_mm)
register_gemm_provider("triton_int8", g.triton_int8, kind="int8", backends=BACKENDS,
                       supported=g.triton_int8_supported, first=False, bind=g.bind_triton_int8)


def _with_fp8(supported):
    def fp8_supported(p: GemmProblem) -> tuple[bool, str]:
        info = current_platform()
        if not info.has_fp8:
            return False, f"{info.arch or info.vendor} has no FP8 GEMM; use int8 keys"
        return supported(p)

    return fp8_supported


register_gemm_provider("small_m_fp8", g.small_m_gemm, kind="fp8", backends=BACKENDS,
                       supported=_with_fp8(g.small_m_supported_in("hip_w8a8")), first=False, bind=g.bind_small_m,
                       bind_quantizing=g.bind_small_m_from_producer,
                       bind_producing=g.bind_small_m_producing)
register_gemm_provider("scaled_mm_fp8", g.scaled_mm_fp8, kind="fp8", backends=BACKENDS,
                       supported=_with_fp8(g.scaled_mm_supported), first=False, bind=g.bind_scaled_mm)
