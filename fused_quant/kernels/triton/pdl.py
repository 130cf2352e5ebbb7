"""Programmatic dependent launch (PDL) in device code.

With PDL (``launch.pdl_options``) a kernel may be scheduled while the kernel before it on the stream
still runs, so the launch and the ramp of the next kernel overlap the tail of this one. Every kernel
of this package therefore starts with ``pdl_prologue``, which does two things:

- it waits until the kernel before has finished and its writes are visible (``griddepcontrol.wait``)
  before the kernel reads or writes any global memory;
- it lets the next kernel be scheduled (``griddepcontrol.launch_dependents``): after the wait in a
  GEMM (``WAIT_FIRST``), before it in the short kernels between GEMMs, the producers and the split-K
  epilogue (``LAUNCH_FIRST``). So the GEMM after a producer is scheduled while the GEMM before the
  producer still runs, and asks L2 for its first weight lines (``prefetch_l2``, the one thing a kernel
  does before its wait).

Each kernel waits for the one before to finish, so every kernel still sees the writes of all kernels
before it. A GEMM lets the next kernel launch only after its own wait, so no GEMM is scheduled more
than one GEMM ahead. A kernel launched without PDL passes the wait at once; with ``PDL`` False (the
interpreter, ROCm, before SM90) nothing is emitted.
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
    # measured on the H200 (benchmarks/RESULTS.md, twelfth round): producers that let the next kernel launch
    # before their wait took about 1 us off the static-key decode MLP; GEMMs doing it too let a chain of GEMMs
    # be scheduled two ahead (FP8 qkv at M = 16: 13.5-13.7 us instead of 10.3-10.5); a GEMM letting the next
    # launch after its wait beat doing it after its K loop (ninth round)
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
