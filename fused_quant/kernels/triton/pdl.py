"""Programmatic dependent launch (PDL) in device code.

With PDL (``launch.pdl_options``) a kernel may be scheduled while the kernel before it on the stream
still runs, so the launch and the ramp of the next kernel overlap the tail of this one. Every kernel
of this package therefore starts with ``pdl_prologue``: it waits until the kernel before has
finished and its writes are visible (``griddepcontrol.wait``) before it reads or writes any global
memory, then lets the next kernel be scheduled. A kernel launched without PDL passes the wait at
once; with ``PDL`` False (the interpreter, ROCm, before SM90) nothing is emitted.
"""

import triton
import triton.language as tl

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # a Triton without grid dependency control: launch.pdl_options keeps PDL off
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def pdl_prologue(PDL: tl.constexpr):
    # measured on the H200: letting the next kernel launch here beats doing it after a GEMM's K loop
    # (benchmarks/results/round9/sweep_trigger_after_k_loop.log against sweep_small_m_gemm.log)
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
