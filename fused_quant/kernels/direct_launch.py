"""The direct launch: a compiled Triton kernel called without Triton's JIT call.

Triton's JIT call re-binds and re-keys every argument (~20 here) on each launch, most of a small
launch's host time. After the first JIT launch of a specialization, ``launch`` keeps the compiled
kernel and calls its private launcher ``compiled.run(gx, gy, gz, stream, function, metadata,
launch_metadata, enter_hook, exit_hook, *args)`` itself, keyed by a specialization at least as
fine as Triton's (``arg_spec``). Both are Triton internals, so the direct launch is used only with
a Triton inside ``TESTED_TRITON`` whose own runner calls the launcher with ``RUNNER_ARGS`` (read
from its source once); every other Triton launches through its JIT. ``tests/kernels/test_direct_launch.py``
checks the installed Triton against this, so an upgrade fails a test instead of a launch. On NVIDIA
a kernel the driver launch lays out (``driver_launch``) skips Triton's launcher as well.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

# 3.6 measured on the H200, 3.7 in CI (the launcher of the ``triton.knobs`` releases)
TESTED_TRITON = SpecifierSet(">=3.6,<3.8")
# What Triton's own runner (``CompiledKernel.__getitem__``) passes its launcher: ``run`` passes the same,
# the launch metadata and hooks None (it runs only when no hook is set)
RUNNER_ARGS = ("grid[0]", "grid[1]", "grid[2]", "stream", "self.function", "self.packed_metadata", "launch_metadata",
               "knobs.runtime.launch_enter_hook", "knobs.runtime.launch_exit_hook", "*args")

_HIP = getattr(torch.version, "hip", None) is not None
MAX_INT32 = (1 << 31) - 1
# What Triton's launcher itself asks torch for (the current device, and its current stream: the
# capturing one under CUDA graph capture); attribute lookups only, nothing is initialized here.
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
raw_stream = (getattr(torch._C, "_cuda_getCurrentRawStream", None)
              or (lambda index: torch.cuda.current_stream(index).cuda_stream))


@functools.cache
def version_ok() -> bool:
    """Whether the installed Triton is one the direct launch was written and measured against."""
    import triton

    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    return runtime is not None and TESTED_TRITON.contains(Version(triton.__version__), prereleases=True)


def runner_call_args(compiled_kernel_cls: type) -> tuple[str, ...] | None:
    """The arguments Triton's own ``compiled[grid](*args)`` runner passes to its launcher, as source
    text (None when its source cannot be read or holds no single ``self.run(...)`` call)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(compiled_kernel_cls.__getitem__)))
    except (OSError, TypeError, SyntaxError):
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "self.run"]
    return tuple(ast.unparse(a) for a in calls[0].args) if len(calls) == 1 else None


@functools.cache
def layout_ok() -> bool:
    """Whether the installed Triton's runner calls its launcher as ``run`` does (read once)."""
    from triton.compiler.compiler import CompiledKernel

    return runner_call_args(CompiledKernel) == RUNNER_ARGS


def usable(compiled: object) -> bool:
    """Whether a compiled kernel may be launched directly (the interpreter returns none)."""
    return (version_ok() and all(hasattr(compiled, a) for a in ("__getitem__", "function", "packed_metadata", "run"))
            and layout_ok())


def tensor_spec(dtype: torch.dtype, aligned: bool = True, small: bool = True) -> tuple:
    return (dtype, aligned, small) if _HIP else (dtype, aligned)


def arg_spec(a) -> int | tuple:
    """What Triton specializes a runtime argument on (a superset of it): for integers == 1,
    divisibility by 16 and 32-bit range; for tensors the dtype, 16-byte alignment and, on ROCm
    (buffer ops), a storage within 2 GiB; for a host tensor descriptor its block and its tensor's, shape's
    and strides' own."""
    if type(a) is int:
        return (a == 1) | ((a % 16 == 0) << 1) | ((not -(1 << 31) <= a <= MAX_INT32) << 2)
    base = getattr(a, "base", None)  # a TensorDescriptor (a torch.Tensor has no ``base``)
    if base is not None:
        return ("descriptor", tuple(a.block_shape), arg_spec(base), *map(arg_spec, (*a.shape, *a.strides)))
    return tensor_spec(a.dtype, a.data_ptr() % 16 == 0, _HIP and a.untyped_storage().size() <= MAX_INT32)


def hooked(hook: object) -> bool:
    """A Triton launch hook is set: a function, or a chain (``HookChain``) holding any."""
    return hook is not None and bool(getattr(hook, "calls", True))


def may_run_now(runtime_knobs, index: int, x2: torch.Tensor, s: torch.Tensor) -> bool:
    """Whether a compiled kernel may run now: loaded for the current device, no Triton launch hooks
    to call, and on ROCm operands within the 2 GiB its buffer ops were compiled for (the outputs
    are allocated to their exact size, checked when planned)."""
    if _current_device() != index or hooked(runtime_knobs.launch_enter_hook) or hooked(runtime_knobs.launch_exit_hook):
        return False
    return not _HIP or (x2.untyped_storage().size() <= MAX_INT32 and s.untyped_storage().size() <= MAX_INT32)


def contiguous_strides(shape: tuple) -> tuple:
    """The strides of a contiguous tensor of ``shape`` (as torch counts them: a size-0 dimension steps
    as a size-1 one), for outputs allocated with ``torch.empty_strided``, which costs the host less
    than ``torch.empty`` (2.0-2.2 vs 3.2-3.9 us on the H200's hosts, benchmarks/RESULTS.md)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def direct_of(compiled, grid: tuple, index: int):
    """The direct launch of ``compiled`` (loaded for device ``index``) over ``grid`` (x, y, z):
    ``launch(stream, args)``. On NVIDIA the driver launch (``driver_launch``) where it lays the kernel
    out, else Triton's launcher."""
    from fused_quant.kernels import driver_launch

    if not _HIP and DRIVER_LAUNCH:
        fast = driver_launch.of(compiled, grid, index)
        if fast is not None:
            return fast
    launcher, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
    g0, g1, g2 = grid

    def triton_launch(stream: int, args: tuple) -> None:
        launcher(g0, g1, g2, stream, function, metadata, None, None, None, *args)

    return triton_launch


# Whether ``direct_of`` may take the driver launch (tests and the host benchmark's A/B turn it off; the
# launches already made keep theirs until ``fused_quant.reset()``)
DRIVER_LAUNCH = True


def run(direct, index: int, args: tuple) -> None:
    """Launch ``direct`` (``direct_of``'s) on the current stream. Pointer arguments are passed as their
    integer addresses: Triton's launcher takes those as they are, where for a tensor it calls
    ``data_ptr()`` and asks the driver about the address once more; the driver launch takes only them."""
    direct(raw_stream(index), args)
