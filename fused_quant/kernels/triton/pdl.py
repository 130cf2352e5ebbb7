"""Programmatic dependent launch (PDL) in device code: ``pdl_prologue``, which each kernel of the package
runs before it reads or writes global memory, and ``prefetch_l2``, the one thing a kernel (the small-M
GEMM, for its own weight) does before it. With ``PDL`` False (the interpreter, ROCm, before SM90)
nothing is emitted. Why and in which order: docs/ARCHITECTURE.md, "Programmatic dependent launch".
"""

import triton
import triton.language as tl

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # a Triton without grid dependency control: launch.pdl_options keeps PDL off
    gdc_launch_dependents = gdc_wait = None


# PDL values: 0 / False off; WAIT_FIRST wait, then let the next kernel launch; LAUNCH_FIRST the reverse
WAIT_FIRST: tl.constexpr = tl.constexpr(1)
LAUNCH_FIRST: tl.constexpr = tl.constexpr(2)


@triton.jit
def pdl_prologue(PDL: tl.constexpr):
    # Waits until the kernel before has finished and its writes are visible (griddepcontrol.wait) and lets the
    # next kernel be scheduled (launch_dependents): GEMMs after their wait, producers and the split-K epilogue
    # before it. Measured on the H200 (benchmarks/RESULTS.md, twelfth round): producers launching first took
    # about 1 us off the static-key decode MLP; GEMMs launching first let a chain of GEMMs be scheduled two
    # ahead (FP8 qkv at M = 16: 13.5-13.7 us, against 10.6-10.7 us with GEMMs waiting first)
    if PDL == LAUNCH_FIRST:
        gdc_launch_dependents()
        gdc_wait()
    elif PDL:
        gdc_wait()
        gdc_launch_dependents()


@triton.jit
def prefetch_l2(ptrs):
    """Ask the L2 cache for the lines holding ``ptrs`` (``prefetch.global.L2``): a hint that loads
    nothing into registers. L2 is where every SM's writes meet, so a prefetch before ``gdc_wait``
    cannot make a later load after the wait see stale data."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                              is_pure=False, pack=1)
