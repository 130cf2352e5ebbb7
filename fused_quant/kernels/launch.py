"""Host side of the Triton act+quant kernels: support predicate, allocation, launch.

Shared by the ``triton_fp8`` and ``hip_w8a8`` producers. Triton is imported on
first launch, never at import. Input rows may have a stride (a 2-D view with
``stride(-1) == 1``); anything that cannot be viewed as ``[M, D]`` rows without
a copy is declined by ``triton_supported`` so the torch backend computes it.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from fused_quant import activations, envs, runtime
from fused_quant import keys as K
from fused_quant.kernels import direct_launch as dl
from fused_quant.kernels import heuristics
from fused_quant.reference import FP8_NAN_CODE, fp8_min_scale
from fused_quant.runtime import capturing
KERNEL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
FAST_SILU_DTYPES = (torch.bfloat16, torch.float16)  # T(silu) measured for every input (act_quant.silu)


def rows_view(x: torch.Tensor) -> torch.Tensor | None:
    """``x`` as ``[M, D_in]`` rows with unit column stride, without copying; None if impossible."""
    if x.stride(-1) != 1 and x.shape[-1] != 1:
        return None
    if x.dim() == 2:
        return x
    try:
        return x.view(-1, x.shape[-1])
    except RuntimeError:
        return None


def triton_supported(x: torch.Tensor, scale: torch.Tensor | None) -> tuple[bool, str]:
    if not x.is_cuda:
        return False, f"Triton kernels run on GPU tensors; input is on {x.device}"
    if x.dtype not in KERNEL_DTYPES:
        return False, f"Triton kernels take bf16/fp16/fp32; input is {x.dtype}"
    if rows_view(x) is None:
        return False, f"input strides {x.stride()} cannot be read as rows without a copy"
    return True, ""


@functools.cache
def _tl():
    """(the kernels' module, torch -> Triton dtypes, Triton's runtime knobs or None where Triton has
    none), imported on first use."""
    import triton
    import triton.language as tl

    from fused_quant.kernels.triton import act_quant

    dtypes = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32,
              torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e4m3fnuz: tl.float8e4b8}
    return act_quant, dtypes, getattr(getattr(triton, "knobs", None), "runtime", None)


def _arch() -> str | None:
    from fused_quant.platforms import current_platform

    return current_platform().arch


# A CUDA build of torch runs "cuda" tensors on NVIDIA GPUs, whose fp32 -> e4m3fn conversion
# (cvt.rn.satfinite) saturates and maps every NaN to 0x7F by itself (``act_quant._to_fp8``), and
# whose ex2.approx / rcp.approx give a silu that rounds to torch's bf16 / fp16 for every input
# (``act_quant.silu``; on the archs whose heuristics say ``fast_silu``). Both were measured there only.
_NVIDIA_TORCH = torch.version.cuda is not None and getattr(torch.version, "hip", None) is None


def _interpreting() -> bool:
    """Triton's interpreter runs the kernels (no PTX: nothing NVIDIA-specific may be compiled in)."""
    return bool(getattr(_tl()[2], "interpret", False))


def nvidia_device(device_index: int) -> bool:
    """Kernels for this device (-1: the interpreter's CPU tensors) are compiled for an NVIDIA GPU: what
    the e4m3fn conversion's own saturation (``SATFINITE``) and the fast silu need."""
    return device_index >= 0 and _NVIDIA_TORCH and not _interpreting()


@functools.cache
def _cuda_arch(device_index: int) -> str:
    """``sm_XY`` of one CUDA device (a machine may hold several kinds)."""
    from fused_quant.platforms import sm_arch

    return sm_arch(*torch.cuda.get_device_capability(device_index))


@functools.cache
def device_name(device_index: int) -> str:
    """The name CUDA reports for one device (``NVIDIA H100 80GB HBM3``): the key of tables measured on one
    GPU model rather than one arch. Read once per device, as ``_cuda_arch``: the small-M predicate asks it on
    every checked call."""
    return torch.cuda.get_device_name(device_index)


PDL_MIN_CAPABILITY = (9, 0)  # griddepcontrol: Hopper and later


def pdl_options(device_index: int, launch_first: bool = False) -> dict:
    """The kernels' ``PDL`` argument for launches on one device, and Triton's ``launch_pdl`` launch
    option where it is on: programmatic dependent launch (``kernels/triton/pdl.py``) on NVIDIA SM90+
    with a Triton that has it, unless ``FUSED_QUANT_PDL=off``; off (False) in the interpreter and on ROCm.
    ``launch_first``: the kernel lets the next one launch before its wait (producers, the split-K
    epilogue); GEMMs wait first."""
    on = runtime.once(f"pdl:{device_index}", lambda: _pdl_ok(device_index))
    if not on:
        return {"PDL": False}
    from fused_quant.kernels.triton import pdl  # imported by _pdl_ok already

    return {"PDL": (pdl.LAUNCH_FIRST if launch_first else pdl.WAIT_FIRST).value, "launch_pdl": True}


def _pdl_ok(device_index: int) -> bool:
    # read first, once per runtime generation for every device: a bad value is an error on every node, not only
    # where PDL could run, and no two devices launch under two readings of the variable
    wanted = runtime.once("pdl", envs.pdl)
    if not wanted or device_index < 0 or not _NVIDIA_TORCH or _interpreting():
        return False
    from fused_quant.platforms import sm_at_least

    return sm_at_least(_cuda_arch(device_index), PDL_MIN_CAPABILITY) and triton_has_pdl()


def triton_has_pdl() -> bool:
    """Whether the installed Triton has grid dependency control in its language and the ``launch_pdl``
    launch option (imports Triton's NVIDIA backend)."""
    from triton.backends.nvidia.compiler import CUDAOptions

    from fused_quant.kernels.triton import pdl

    return pdl.gdc_wait is not None and "launch_pdl" in getattr(CUDAOptions, "__dataclass_fields__", {})


@functools.lru_cache(maxsize=None)
def _constexprs(act: str, key_name: str, x_dtype: torch.dtype, round_product: bool, fp8_dtype: torch.dtype,
                fast_div: bool, satfinite_ok: bool, fast_silu_ok: bool) -> dict:
    """The kernels' compile-time arguments for one producer (built once; callers must not mutate).
    ``satfinite_ok``: the device's e4m3fn conversion may do the FP8 clamp and NaN code;
    ``fast_silu_ok``: the device may compute a bf16 / fp16 silu with its approximate ex2 and reciprocal."""
    _, tl_dtypes, _ = _tl()
    key = K.key_from_name(key_name)
    fp8 = K.is_fp8(key)
    out = dict(
        ACT=activations.ACTIVATIONS[act].code, QUANT=K.KERNEL_CODES[key_name], T=tl_dtypes[x_dtype],
        ROUND_PRODUCT=round_product,
        M8=K.fp8_max(fp8_dtype) if fp8 else 127.0, FP8=tl_dtypes[fp8_dtype], NAN_CODE=FP8_NAN_CODE[fp8_dtype],
        SATFINITE=satfinite_ok and fp8 and fp8_dtype == torch.float8_e4m3fn,
        FAST_SILU=fast_silu_ok and act == "silu_and_mul" and x_dtype in FAST_SILU_DTYPES, FAST_DIV=fast_div,
    )
    if K.is_per_token(key):
        out["MIN_SCALE"] = fp8_min_scale(fp8_dtype)
    return out


class _Plan(NamedTuple):
    """One launch, resolved: the kernel, its grid and compile-time arguments, and what it needs."""

    kernel: object  # a triton JITFunction
    grid: tuple[int, int, int]
    kwargs: dict  # compile-time arguments and launch options, for the JIT call
    consts: tuple  # the kernel's compile-time arguments in signature order, for the direct launch
    variant: str  # "static", "flat" (static keys), one of heuristics.TOKEN_VARIANTS or "split_absmax" (its first)
    scratch: torch.dtype | None  # persistent kernel: dtype of its scratch rows (grid[0] x D)
    kernel_id: tuple  # (kernel, compile-time arguments and launch options): what a compiled kernel is
    first: "_Plan | None" = None  # split rows: the launch before this one (the parts' absmax, into a scratch)


def _plan(act: str, key_name: str, x_dtype: torch.dtype, round_product: bool, fp8_dtype: torch.dtype, m: int,
          d: int, flat_ok: bool, device_index: int, config: tuple | None, captured: bool = False) -> _Plan:
    """The launch for one (producer, M, D) on one device (-1: the interpreter's CPU tensors):
    the heuristics (or ``config`` when tuning) made concrete; ``captured``: for calls under CUDA graph capture."""
    kernels, tl_dtypes, _ = _tl()
    per_token = _outputs(key_name, fp8_dtype)[1]
    arch = _arch()
    cfg = dict(config) if config else {}
    fast_div = bool(cfg.pop("fast_div", 1))
    nvidia = nvidia_device(device_index)
    satfinite_ok = bool(cfg.pop("satfinite", nvidia))  # the interpreter tests model it (shim)
    # the approximate units' results are the device's own arch's; a tuning override still needs NVIDIA
    # (inline PTX). Which producers may use it is _constexprs' business.
    fast_silu = cfg.pop("fast_silu", None)
    fast_silu_ok = nvidia and bool(heuristics.config_for(_cuda_arch(device_index)).fast_silu
                                   if fast_silu is None else fast_silu)
    common = _constexprs(act, key_name, x_dtype, round_product, fp8_dtype, fast_div, satfinite_ok, fast_silu_ok)
    scratch = first = None  # the persistent kernel's scratch rows; split rows' first launch
    if not per_token:
        cfg = cfg or heuristics.static_launch(m, d, arch, act)
        variant = "static"
        if cfg.pop("flat", 0):
            tile = {"BLOCK_M": cfg.pop("BLOCK_M", 1), "BLOCK_N": cfg.pop("BLOCK_N", 1024),
                    "num_warps": cfg.pop("tile_warps", cfg["num_warps"])}
            if flat_ok:
                variant, kernel = "flat", kernels.act_quant_static_flat_kernel
                grid = (triton_cdiv(m * d, cfg["BLOCK"]),)
            else:
                cfg = tile  # strided rows: the tile kernel
        if variant == "static":
            kernel = kernels.act_quant_static_kernel
            grid = (triton_cdiv(m, cfg["BLOCK_M"]), triton_cdiv(d, cfg["BLOCK_N"]))
    else:
        cfg = cfg or heuristics.token_launch(m, d, arch, act, common["FAST_SILU"], captured)
        variant = cfg.pop("variant")
        if variant in ("two_pass", "persistent"):
            cfg.setdefault("STAGES", 1)
        if variant == "persistent":
            # programs_per_sm programs per SM loop over rows; y parked in scratch rows
            kernel = kernels.act_quant_token_persistent_kernel
            grid = (max(1, min(m, _num_sms(device_index) * cfg.pop("programs_per_sm"))),)
            use_scratch = bool(cfg.pop("scratch"))
            y_dtype = x_dtype if (round_product or act != "silu_and_mul") else torch.float32
            scratch = y_dtype if use_scratch else None
            cfg.update(USE_SCRATCH=use_scratch, Y=tl_dtypes[y_dtype])
        elif variant == "chunks":  # one pass, the row in registers as NCHUNK chunks of CHUNK columns
            kernel, grid = kernels.act_quant_token_chunks_kernel, (m,)
            cfg.setdefault("NCHUNK", triton_cdiv(d, cfg["CHUNK"]))
            if cfg["NCHUNK"] * cfg["CHUNK"] < d:
                raise ValueError(f"NCHUNK x CHUNK = {cfg['NCHUNK']} x {cfg['CHUNK']} does not cover a row of {d}")
        elif variant == "two_pass":
            kernel, grid = kernels.act_quant_token_2pass_kernel, (m,)
        elif variant == "rows":  # one pass, ROWS rows of one block each per program
            kernel, grid = kernels.act_quant_token_kernel, (triton_cdiv(m, cfg["ROWS"]),)
        elif variant == "split":  # BLOCK_N columns of a row per program: the parts' absmax, then the quantization
            kernel, grid = kernels.act_quant_token_split_kernel, (m, triton_cdiv(d, cfg["BLOCK_N"]))
            cfg["PARTS"] = heuristics.next_pow2(grid[1])
            absmax = kernels.act_quant_token_split_absmax_kernel
            own = {k: v for k, v in {**common, **cfg}.items() if k in absmax.arg_names or k == "num_warps"}
            first = make_plan(absmax, grid, {**own, **pdl_options(device_index, launch_first=True)}, "split_absmax")
        else:
            raise ValueError(f"per-token kernel variant {variant!r} is not one of "
                             f"{', '.join(heuristics.TOKEN_VARIANTS)}")
    plan = make_plan(kernel, grid, {**common, **cfg, **pdl_options(device_index, launch_first=True)}, variant)
    return plan._replace(scratch=scratch, first=first)


def reset_plans() -> None:
    """Plan every launch again (after the heuristics' data changed): the runtime's one reset."""
    runtime.reset()


@functools.lru_cache(maxsize=None)
def _outputs(key_name: str, fp8_dtype: torch.dtype) -> tuple[torch.dtype, bool]:
    """(q dtype, per-token) of a producer's outputs."""
    key = K.key_from_name(key_name)
    return K.storage_dtype(key, fp8_dtype), K.is_per_token(key)


def launch_act_quant(x: torch.Tensor, act: str, key: K.QuantKey, scale: torch.Tensor | None,
                     round_product: bool, fp8_dtype: torch.dtype,
                     config: dict[str, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run one producer kernel; returns (q, scale) with q ``[*lead, D]``, per-token scale ``[*lead, 1]``.

    ``config`` overrides the heuristics (tuning only).
    """
    return launch_rows(x, rows_view(x), act, key, scale, round_product, fp8_dtype, config)


def launch_rows(x: torch.Tensor, x2: torch.Tensor, act: str, key: K.QuantKey, scale: torch.Tensor | None,
                round_product: bool, fp8_dtype: torch.dtype,
                config: dict[str, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``launch_act_quant`` for ``x`` already viewed as rows (``x2 = rows_view(x)``)."""
    return bind_rows(x, x2, act, K.key_name(key), round_product, fp8_dtype, config)(x, scale)


def bind_rows(x: torch.Tensor, x2: torch.Tensor, act: str, key_name: str, round_product: bool,
              fp8_dtype: torch.dtype, config: dict[str, int] | None = None) -> "BoundLaunch":
    """The launch of one producer for every input with ``x``'s dtype and shape, ``x2``'s row stride
    and ``x``'s device (``x2 = rows_view(x)``)."""
    args = (act, key_name, x.dtype, x.shape, x2.stride(0), round_product, fp8_dtype, x.device)
    if config:
        return BoundLaunch(*args, tuple(config.items()))
    bound = _LAUNCHES.get(args)
    if bound is None:
        generation = runtime.generation()
        bound = _LAUNCHES.put(args, BoundLaunch(*args, None), generation)
    return bound


# One bound launch per input signature (producer, dtype, shape, row stride, device); each holds its
# plan and, once found, its compiled kernel.
_LAUNCHES = runtime.Cache("launches")


class _Resolved(NamedTuple):
    """A bound launch's plan for one generation, published as one object (threads read it whole)."""

    generation: int
    plan: _Plan | None  # None: M = 0, nothing to launch
    tail: tuple  # runtime arguments after (x2, q, s)
    rest: tuple  # tail and the plan's constexprs: the direct launch's arguments after (x2, q, s)
    spec: tuple | None  # the key ``_launch`` files the aligned operands' compiled kernel under
    direct: list  # [(launcher, grid x3, function, metadata)] once found in _COMPILED, else [None]
    captured: _Plan | None = None  # the plan for calls under CUDA graph capture where it is another


class BoundLaunch:
    """One producer's launch for one input signature (dtype, shape, strides, device), resolved once:
    output shapes, the plan and, after Triton has compiled the kernel for 16-byte aligned operands,
    that compiled kernel. A call allocates the outputs and launches it directly: none of the per-call
    planning, argument binding and re-keying of Triton's JIT call, which cost more than the small
    kernels themselves take on the GPU. Anything the direct launch does not cover (unaligned
    operands, another current device, Triton launch hooks, the interpreter, the persistent kernel's
    scratch, a Triton whose launcher was not measured) takes ``_launch``, Triton's own JIT path on a miss.
    So do calls under CUDA graph capture where the heuristics plan otherwise for them (per-token rows
    split over programs at a few tokens: two launches, which a replay does not pay the host for).
    """

    __slots__ = ("args", "q_shape", "q_strides", "q_dtype", "s_shape", "s_strides", "device", "index", "rows",
                 "q_small", "resolved")

    def __init__(self, act: str, key_name: str, x_dtype: torch.dtype, shape: torch.Size, row_stride: int,
                 round_product: bool, fp8_dtype: torch.dtype, device: torch.device, config: tuple | None):
        lead, d_in = tuple(shape[:-1]), shape[-1]
        m = math.prod(lead)
        self.args = (act, key_name, x_dtype, round_product, fp8_dtype, config, row_stride, (m, d_in))
        self.device = device
        self.index = device_index(device)
        d = activations.out_features(act, d_in)
        self.q_dtype, per_token = _outputs(key_name, fp8_dtype)
        self.q_shape, self.s_shape = (*lead, d), ((*lead, 1) if per_token else None)
        self.q_strides = dl.contiguous_strides(self.q_shape)
        self.s_strides = dl.contiguous_strides(self.s_shape) if per_token else None
        # on ROCm q's storage (its exact size) is part of the specialization
        self.q_small = m * d * self.q_dtype.itemsize <= dl.MAX_INT32
        self.rows = None if len(shape) == 2 else (m, d_in)  # x.view(rows) is rows_view(x)
        self.resolved = self._resolve()

    def _resolve(self) -> _Resolved:
        generation = runtime.generation()  # read first: a reset during planning makes the next call plan again
        act, key_name, x_dtype, round_product, fp8_dtype, config, row_stride, (m, d_in) = self.args
        d = self.q_shape[-1]
        if m == 0:
            return _Resolved(generation, None, (), (), None, [None])
        flat_ok = act != "silu_and_mul" and row_stride == d_in
        plan = _plan(act, key_name, x_dtype, round_product, fp8_dtype, m, d, flat_ok, self.index, config)
        captured = None
        if config is None and self.s_shape is not None:  # per-token keys: another plan under capture?
            captured = _plan(act, key_name, x_dtype, round_product, fp8_dtype, m, d, flat_ok, self.index, None, True)
            captured = None if captured.kernel_id == plan.kernel_id else captured
        tail = (m * d,) if plan.variant == "flat" else (m, d, row_stride)
        spec = None
        if plan.first is None and plan.variant != "persistent" and dl.version_ok():  # (no scratch operand)
            spec = (plan.kernel_id, self.index, dl.tensor_spec(x_dtype),
                    dl.tensor_spec(self.q_dtype, True, self.q_small), dl.tensor_spec(torch.float32),
                    *[dl.arg_spec(a) for a in tail])
        return _Resolved(generation, plan, tail, (*tail, *plan.consts), spec, [None], captured)

    def __call__(self, x: torch.Tensor, scale: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        q = torch.empty_strided(self.q_shape, self.q_strides, dtype=self.q_dtype, device=self.device)
        s = scale if self.s_shape is None else torch.empty_strided(self.s_shape, self.s_strides, dtype=torch.float32,
                                                                   device=self.device)
        r = self.resolved
        if r.generation != runtime.generation():
            r = self.resolved = self._resolve()
        plan = r.plan
        if plan is None:  # M = 0: nothing to launch
            return q, s
        x2 = x if self.rows is None else x.view(self.rows)
        if r.captured is not None and capturing():
            plan = r.captured
        if plan.first is not None:  # split rows (under capture, or tuning): the parts' absmax, then the rest
            part = torch.empty(plan.grid[:2], dtype=torch.float32, device=self.device)
            _launch(plan.first, (x2, part, *r.tail))
            _launch(plan, (x2, q, s, part, *r.tail))
            return q, s
        direct = r.direct[0] or _direct_of(r)
        if direct is not None and s.dtype == torch.float32:
            xp, qp, sp = x2.data_ptr(), q.data_ptr(), s.data_ptr()
            if not (xp | qp | sp) & 15 and dl.may_run_now(_tl()[2], self.index, x2, s):
                dl.run(direct, self.index, (xp, qp, sp, *r.rest))
                return q, s
        if plan.variant == "persistent":
            y = torch.empty((plan.grid[0], self.q_shape[-1]) if plan.scratch else (1,),
                            dtype=plan.scratch or x.dtype, device=self.device)
            _launch(plan, (x2, q, s, y, *r.tail))
        else:
            _launch(plan, (x2, q, s, *r.tail))
        return q, s


def _direct_of(r: _Resolved):
    """The direct launch (``direct_launch.direct_of``), once Triton has compiled the kernel."""
    compiled = _COMPILED.get(r.spec) if r.spec is not None else None
    if compiled is None:
        return None
    r.direct[0] = direct = dl.direct_of(compiled, r.plan.grid, r.spec[1])
    return direct


# Compiled kernels by (plan, device, argument specialization), for the direct launch
# (``direct_launch``). Launch hooks and the current stream (CUDA graph capture) are honoured; Triton
# debug / instrumentation settings changed after a specialization's first launch are not seen by it.
_COMPILED = runtime.Cache("compiled")


def _launch(plan: _Plan, args: tuple) -> object | None:
    """Launch through Triton (its JIT on a miss); returns the compiled kernel when it may be launched
    directly (``direct_launch.usable``), else None."""
    # Triton launches on the current device and its stream; a compiled kernel is loaded for the device it was first
    # run on. Operands on another device (a model spread over GPUs in one process) make it current for the launch.
    first = getattr(args[0], "base", args[0])  # a descriptor's tensor
    device = torch.cuda.current_device() if first.is_cuda else -1
    if first.is_cuda and first.device.index != device:
        with torch.cuda.device(first.device):
            return _launch(plan, args)
    spec = (plan.kernel_id, device, *[dl.arg_spec(a) for a in args])
    compiled = _COMPILED.get(spec)
    if compiled is not None:
        compiled[plan.grid](*args, *plan.consts)
        return compiled
    generation = runtime.generation()
    compiled = plan.kernel[plan.grid](*args, **plan.kwargs)
    if dl.usable(compiled):  # the Triton interpreter returns no compiled kernel
        return _COMPILED.put(spec, compiled, generation)
    return None


def make_plan(kernel, grid: tuple, kwargs: dict, variant: str) -> _Plan:
    """A launch of ``kernel`` with compile-time arguments and launch options ``kwargs``."""
    consts = tuple(kwargs[name] for name in kernel.arg_names if name in kwargs)
    # the compiled kernel's launcher takes all three grid dimensions
    return _Plan(kernel, (*grid, 1, 1)[:3], kwargs, consts, variant, None, (kernel, *kwargs.items()))


def device_index(device: torch.device) -> int:
    """The CUDA index a kernel launch is keyed on; -1 for the interpreter's CPU tensors."""
    return device.index if device.type == "cuda" else -1


@functools.cache
def _num_sms(device_index: int) -> int:
    if device_index < 0:  # the Triton interpreter runs kernels on CPU tensors
        return 2
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.cache
def max_shared_memory(device_index: int) -> int:
    """The shared memory bytes a block may take on a device, as Triton's launch checks them."""
    import triton

    return triton.runtime.driver.active.utils.get_device_properties(device_index)["max_shared_mem"]


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
