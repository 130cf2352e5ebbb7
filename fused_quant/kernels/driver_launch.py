"""The driver launch: a compiled Triton kernel started by one ``cuLaunchKernelEx`` call (NVIDIA only).

Triton's launcher converts each of a small-M GEMM's ~20 arguments on every call before it asks the
driver to launch. A kernel whose arguments keep their types can skip that: ``of`` lays the kernel's
parameters out once (one 8-byte slot each, in the order its PTX entry declares them) with the launch
configuration Triton's launcher would build (grid, ``32 * num_warps`` threads, shared memory, the PDL
attribute); a call then packs the runtime arguments into the slots with one ``struct`` call and makes
one foreign call. ``of`` returns None, and the caller keeps Triton's launcher, for what it does not lay
out: ROCm, clusters, cooperative grids, kernels with global or profile scratch, a PTX entry whose
parameters do not match the signature, argument types other than pointers, integers and fp32 /
fp64 scalars (the PTX passes fp16 / bf16 scalars as byte arrays), or no ``libcuda`` with
``cuLaunchKernelEx``. Pointer arguments are passed as integer addresses (``direct_launch.run``'s callers
already do). The slots are the kernel's, shared by every caller: one launch at a time fills them and
hands them to the driver, which copies them. A launch from a thread with no current CUDA context makes
the kernel's device's primary context current and is made once more, as Triton's launcher ensures a
context before each launch.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import re
import struct
import threading
from typing import NamedTuple

import torch

# The C types of Triton's scalar signature entries (pointers, "*...", are addresses: "Q")
_FORMATS = {"i1": "?", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q",
            "u64": "Q", "fp32": "f", "fp64": "d"}
# Bytes of a PTX parameter type
_PTX_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}
_ENTRY = re.compile(r"\.entry\s+[\w$]+\s*\(([^)]*)\)")
_PARAM = re.compile(r"\.param\s+\.[a-z]+?(8|16|32|64)\b")
# CUDA's grid limits: gridDim.x up to 2^31 - 1, y and z up to 65535
_MOST_X, _MOST_YZ = 2**31 - 1, 65535
# cuda.h: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
_PDL_ATTRIBUTE = 6


class _Attribute(ctypes.Structure):  # CUlaunchAttribute: an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class _Config(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_Attribute)), ("numAttrs", ctypes.c_uint)]


class DriverError(RuntimeError):
    """The driver refused a launch (its error name and code are in the message)."""


# cuda.h: CUDA_ERROR_INVALID_CONTEXT, what a launch from a thread without a current context returns
_INVALID_CONTEXT = 201


class _Driver(NamedTuple):
    launch: object  # cuLaunchKernelEx(config, function, params, extra)
    error_name: object  # cuGetErrorName(code, &text)
    ensure_context: object  # (device index) -> whether it made the device's primary context current now


def context_ensurer(get_current, device_get, primary_retain, set_current):
    """``ensure_context(index)`` from the driver's context calls: where no context is current on this
    thread (one that has launched nothing through torch's runtime yet), make device ``index``'s primary
    context current, as Triton's launcher does before each launch; True where it did."""

    def ensure_context(index: int) -> bool:
        ctx, device = ctypes.c_void_p(), ctypes.c_int()
        if get_current(ctypes.byref(ctx)) or ctx.value:
            return False  # a context is current: the refusal was about something else
        if device_get(ctypes.byref(device), index) or primary_retain(ctypes.byref(ctx), device):
            return False
        return not set_current(ctx)

    return ensure_context


@functools.cache
def _driver() -> _Driver | None:
    """The driver calls a launch makes, from the loaded ``libcuda``; None without one."""
    if torch.version.cuda is None or getattr(torch.version, "hip", None) is not None:
        return None
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        launch, name = lib.cuLaunchKernelEx, lib.cuGetErrorName
        get_current, device_get = lib.cuCtxGetCurrent, lib.cuDeviceGet
        retain, set_current = lib.cuDevicePrimaryCtxRetain, lib.cuCtxSetCurrent
    except (OSError, AttributeError):
        return None
    launch.argtypes = (ctypes.c_void_p,) * 4
    name.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    get_current.argtypes, set_current.argtypes = (ctypes.c_void_p,), (ctypes.c_void_p,)
    device_get.argtypes, retain.argtypes = (ctypes.c_void_p, ctypes.c_int), (ctypes.c_void_p, ctypes.c_int)
    for f in (launch, name, get_current, device_get, retain, set_current):
        f.restype = ctypes.c_int
    return _Driver(launch, name, context_ensurer(get_current, device_get, retain, set_current))


def ptx_params(ptx: str) -> list[int] | None:
    """The byte size of each parameter of the (single) kernel entry in ``ptx``, in order."""
    entries = _ENTRY.findall(ptx)
    if len(entries) != 1:
        return None
    params = [p for p in entries[0].split(",") if p.strip()]
    sizes = [_PARAM.search(p) for p in params]
    return None if not all(sizes) else [_PTX_SIZES[s.group(1)] for s in sizes]


def layout(signature: list[str], sizes: list[int]) -> tuple[tuple[int, ...], str, int] | None:
    """For a kernel's Triton signature (one type per argument, ``"constexpr"`` for those compiled in)
    and its PTX parameters' sizes: (the positions of the arguments the kernel takes, the ``struct``
    format packing them into 8-byte slots, the number of trailing scratch pointers Triton appends),
    or None where they do not match."""
    keep, formats = [], []
    for i, kind in enumerate(signature):
        if kind == "constexpr":
            continue
        fmt = "Q" if kind.startswith("*") else _FORMATS.get(kind)
        if fmt is None:
            return None
        keep.append(i)
        formats.append(fmt)
    extra = len(sizes) - len(formats)
    if not keep or not 0 <= extra <= 2 or any(s != 8 for s in sizes[len(formats):]):
        return None
    if any(struct.calcsize(f) != s for f, s in zip(formats, sizes)):
        return None
    return tuple(keep), "<" + "".join(f + "x" * (8 - struct.calcsize(f)) for f in formats), extra


class DriverLaunch:
    """One compiled kernel and grid: ``launch(stream, args)`` with every argument of the kernel in
    signature order (constexprs included, as Triton's launcher takes them), pointers as addresses."""

    __slots__ = ("_launch", "_driver", "_index", "_function", "_nargs", "_lock", "_config", "_config_at", "_attrs",
                 "_buffer", "_params", "_params_at", "_pack", "_take", "_stream", "_name")

    def __init__(self, driver: _Driver, index: int, function: int, grid, num_warps: int, shared: int, pdl: bool,
                 nargs: int, keep, fmt: str, scratch: int, name: str = "?"):
        self._driver, self._launch, self._index = driver, driver.launch, index  # index: the kernel's device
        self._name = name  # the kernel's, for a refusal's message
        self._nargs = nargs  # the kernel's arguments, constexprs included
        # one launch at a time packs the slots and hands them over: the foreign call lets other threads run
        self._lock = threading.Lock()
        self._function = function  # the kernel's CUfunction, loaded by Triton
        count = len(keep) + scratch  # at least one: ``layout`` keeps at least one argument
        self._buffer = ctypes.create_string_buffer(8 * count)  # scratch slots stay 0 (no scratch)
        base = ctypes.addressof(self._buffer)
        self._params = (ctypes.c_void_p * count)(*[base + 8 * i for i in range(count)])
        self._params_at = ctypes.addressof(self._params)
        self._attrs = _Attribute(id=_PDL_ATTRIBUTE, value=1)
        self._config = _Config(*grid, 32 * num_warps, 1, 1, shared, None, ctypes.pointer(self._attrs), int(pdl))
        self._config_at = ctypes.addressof(self._config)
        self._pack = struct.Struct(fmt).pack_into
        self._take = operator.itemgetter(*keep) if len(keep) > 1 else (lambda a, i=keep[0]: (a[i],))
        self._stream = None

    def __call__(self, stream: int, args: tuple) -> None:
        if len(args) != self._nargs:  # a slot would take another argument's value
            raise TypeError(f"the kernel takes {self._nargs} arguments (constexprs included), got {len(args)}")
        values = self._take(args)
        with self._lock:
            if stream != self._stream:
                self._config.hStream = stream or None
                self._stream = stream
            self._pack(self._buffer, 0, *values)
            rc = self._launch(self._config_at, self._function, self._params_at, None)
            if rc == _INVALID_CONTEXT and self._driver.ensure_context(self._index):
                rc = self._launch(self._config_at, self._function, self._params_at, None)
        if rc:
            text = ctypes.c_char_p()
            self._driver.error_name(rc, ctypes.byref(text))
            grid = (self._config.gridDimX, self._config.gridDimY, self._config.gridDimZ)
            raise DriverError(f"cuLaunchKernelEx failed: {(text.value or b'?').decode()} ({rc}), launching kernel "
                              f"{self._name} over grid {grid} on CUDA device {self._index}")


def of(compiled, grid: tuple, index: int) -> DriverLaunch | None:
    """The driver launch of Triton's ``compiled`` kernel, loaded for CUDA device ``index``, over ``grid``
    (x, y, z), or None where it cannot be laid out (the module docstring says which)."""
    driver = _driver()
    meta = getattr(compiled, "metadata", None)
    asm, src = getattr(compiled, "asm", None), getattr(compiled, "src", None)
    if (driver is None or meta is None or not isinstance(asm, dict) or "ptx" not in asm or len(grid) != 3
            or min(grid) < 1 or grid[0] > _MOST_X or max(grid[1:]) > _MOST_YZ):
        return None  # a grid past CUDA's limits: the config's 32-bit fields would wrap it; Triton's launcher refuses
    if (getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "launch_cooperative_grid", False)
            or getattr(meta, "global_scratch_size", 0) or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "tensordesc_meta", None)):
        return None
    signature = getattr(src, "signature", None)
    sizes = ptx_params(asm["ptx"])
    if not isinstance(signature, dict) or sizes is None or not all(isinstance(t, str) for t in signature.values()):
        return None
    laid = layout(list(signature.values()), sizes)
    if laid is None:
        return None
    function = getattr(compiled, "function", None)
    if not isinstance(function, int) or not function:
        return None
    name = getattr(compiled, "name", None) or getattr(meta, "name", None) or "?"
    return DriverLaunch(driver, index, function, grid, meta.num_warps, meta.shared, bool(getattr(meta, "launch_pdl", False)),
                        len(signature), *laid, name=str(name))
