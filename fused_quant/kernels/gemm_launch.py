"""Host side of the CUDA/ROCm GEMM providers: ``torch._scaled_mm`` (FP8, one of ``SCALED_MM_WAYS``),
``torch._int_mm`` + epilogue, the Triton scaled int8 GEMM and the small-M weight-streaming GEMM (FP8 and
int8), each with its ``(ok, reason)`` predicate and a ``bind`` that resolves a layer's call once.

Tile configs are data: ``INT8_GEMM_CONFIGS`` (first row whose max_m >= M, with how it reads its tiles; a GPU
model's own rows where its sweep picks others, ``INT8_GEMM_DEVICE_CONFIGS``) and, for the small-M
GEMM, ``small_m_gemm_configs.json`` beside this file, written by ``benchmarks/sweep_small_m_gemm.py``
on each arch: per (kind, N, K, M bucket) the fastest config and every torch provider's time there, and a GPU
model's own rows where its sweep was installed as such (``--own-rows``), which serve that model only.
The small-M provider accepts a problem only where its config measured faster; ``torch._scaled_mm`` runs
per-token / per-channel problems in the way measured faster there (``scaled_mm_way``).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import threading
from fractions import Fraction
from pathlib import Path

import torch

from fused_quant import keys as K
from fused_quant import runtime
from fused_quant.gemm import GemmProblem, dequant_epilogue, gemm_providers
from fused_quant.kernels import direct_launch as dl
from fused_quant.kernels import launch
from fused_quant.runtime import capturing

# How the Triton int8 GEMM reads its tiles (a row's last field): "pointers" (``scaled_int8_gemm_kernel``, one
# program per tile), or tensor descriptors (``scaled_int8_gemm_tma_kernel``, TMA on SM90+) with one program per tile
# ("tma"), one program per SM taking tiles in turn ("tma persistent"), or the same with the tile and K loops
# flattened into one pipeline ("tma persistent flat"). A descriptor row runs through pointers, in its tile, where the
# operands cannot be described (``tma_ok``, and an activation not 16-byte aligned).
INT8_LOADS = ("pointers", "tma", "tma persistent", "tma persistent flat")
# (max_m, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, loads). Past 256 tokens from
# benchmarks/sweep_int8_gemm.py's candidates, timed on an H100 SXM (benchmarks/RESULTS.md, thirty-ninth round,
# run 1): the descriptor kernel, summed over Llama-3-8B's four linears 1.17x the pointer kernel's tiles at 512
# tokens, 1.15x at 1024, 1.18x at 4096, 1.14x at 16384, the same bits
INT8_GEMM_CONFIGS = (
    (64, 64, 64, 128, 8, 4, 4, "pointers"),
    (256, 64, 128, 128, 8, 4, 4, "pointers"),
    (512, 128, 128, 256, 8, 8, 3, "tma persistent flat"),
    (4096, 128, 256, 128, 8, 8, 4, "tma persistent flat"),
    (1 << 62, 128, 256, 128, 16, 8, 3, "tma persistent"),
)
# The GPU model whose sweep gave the rows past 256 tokens (what ``fused-quant probe`` tells a node)
INT8_GEMM_MEASURED_ON = "NVIDIA H100 80GB HBM3"
# A GPU model's own rows, by the name CUDA reports for it, where its sweep picks other tiles than the rows above
INT8_GEMM_DEVICE_CONFIGS: dict[str, tuple] = {}
SMALL_M_CONFIG_FILE = Path(__file__).with_name("small_m_gemm_configs.json")
# The int8 per-token quantizing calls' configs, per arch and (M bucket, shape), as benchmarks/quantizing_calls.py
# measured them fastest (``quantizing_config``); the same format as the sweep's table
SMALL_M_QUANTIZING_FILE = Path(__file__).with_name("small_m_quantizing_configs.json")
# the token counts the small-M table is swept at; a problem takes the next one up. 160 and 192: above 128
# tokens torch._scaled_mm's row-wise FP8 kernel and the Triton int8 GEMM measured otherwise than at 256
# (benchmarks/RESULTS.md, nineteenth round: FP8 gate_up row-wise 81.5 us at M = 136, the fp32 way 47.9)
M_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 160, 192, 256)
CONFIG_FIELDS = ("BLOCK_N", "BLOCK_M", "BLOCK_K", "splits", "num_warps", "num_stages")
# fp8 MMAs on sm_90 accumulate with reduced precision inside one instruction chain; Triton adds the
# chain into the fp32 accumulator every this many products (what keeps the float64 bound K-independent)
FP8_IMPRECISE_ACC = 32
# With PDL, a small-M GEMM asks L2 for about this many bytes of its weight (its programs' first lines)
# before its grid dependency wait, while the kernel before still runs
PREFETCH_BYTES = 4 << 20
# A per-token quantizing call's absmax sweep loads this many floats a thread per step (``sweep_width``)
SWEEP_LANE_FLOATS = 64
# The ways ``bind_scaled_mm`` runs ``torch._scaled_mm``, by the names the sweep records their times under:
# one scale each; row-wise scales; an fp32 product with the scales and the bias applied by the Triton
# epilogue kernel (the split-K reduction's, over one split). On the H200 row-wise took 1.28-1.74x the fp32
# way's time at M = 16 for Llama-3-8B's four linears and 1.21-1.81x for down at M = 64-256, but less than it
# for gate_up at M = 64-256 and qkv at 256 (benchmarks/RESULTS.md, seventeenth round, run 1): the sweep's
# rows decide.
SCALED_MM_TENSOR_WISE = "scaled_mm_fp8 (tensor-wise)"
SCALED_MM_ROW_WISE = "scaled_mm_fp8 (row-wise)"
SCALED_MM_FP32 = "scaled_mm_fp8 (fp32 + epilogue)"
SCALED_MM_WAYS = (SCALED_MM_TENSOR_WISE, SCALED_MM_ROW_WISE, SCALED_MM_FP32)
# CUDA's limit on a grid's second and third axes (the first takes 2^31 - 1)
GRID_YZ_MAX = 65535
# The epilogue kernel's tile (output columns x tokens) and warps
EPILOGUE_TILE = (64, 16, 4)


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def prefetch_lines(block_n: int, programs: int, k_bytes: int, pdl: bool) -> int:
    """The small-M kernel's ``PREFETCH``: 128-byte lines per weight row for each of ``programs`` programs
    (N blocks x K splits) that stream ``k_bytes`` of each row. A power of two: the largest within
    ``PREFETCH_BYTES`` over all programs (one line at least), but no more than covers ``k_bytes``.
    0 without PDL (nothing runs early then) or with nothing to stream."""
    if not pdl or PREFETCH_BYTES <= 0 or programs <= 0 or k_bytes <= 0:
        return 0
    budget = _pow2_floor(max(1, PREFETCH_BYTES // (programs * block_n * 128)))
    return min(budget, 1 << (-(-k_bytes // 128) - 1).bit_length())


def weight_eviction(m_programs: int) -> str:
    """The small-M kernel's weight loads' L2 eviction policy where it prefetches: ``evict_first`` where one
    program reads each weight line (one token block), so the streamed weight does not push out lines
    prefetched for the next kernel; the default where several token blocks read it again."""
    return "evict_first" if m_programs == 1 else ""


def tokens_first(m_programs: int, n_programs: int) -> bool:
    """Whether the small-M kernel's grid puts its token blocks on axis 0, before the weight's N blocks: where there
    are several, so that the programs reading one weight tile launch side by side and the later ones find it in L2
    rather than HBM. On the H200 that took int8 gate_up at M = 160-256 with 128-token blocks from 65.8-68.1 to
    56.3-58.3 us and FP8 gate_up at M = 160 / 192 with 64-token blocks from 90.4-91.2 to 85.2-85.6, the same bits
    (benchmarks/RESULTS.md, twentieth round, run 2; on down some configs lost 4-14%, the table's rows did not
    move). One token block keeps N on axis 0: with the order turned its grids ran 1-12% slower there, in a
    second process (not interleaved). N blocks beyond a grid's second axis (``GRID_YZ_MAX``) stay on axis 0."""
    return m_programs > 1 and n_programs <= GRID_YZ_MAX


def _on_gpu(p: GemmProblem) -> tuple[bool, str]:
    """A GPU problem whose FP8 operands (for an FP8 problem) are the format this node's GEMMs compute with:
    e4m3fn on NVIDIA, e4m3fnuz on gfx942. Data of the other format (a checkpoint of another node, a layer built
    with another ``fp8_dtype``) goes on down the chain to the torch backend's FP8 GEMM, exact for both."""
    if p.device.type != "cuda":
        return False, f"needs a GPU tensor, got {p.device}"
    if p.kind == "fp8":
        from fused_quant.platforms import current_platform

        want = current_platform().fp8_dtype
        if want is not None and p.x_dtype != want:
            return False, f"this node's FP8 GEMMs take {want}, got {p.x_dtype}"
    return True, ""


def scaled_mm_supported(p: GemmProblem) -> tuple[bool, str]:
    ok, why = _on_gpu(p)
    if not ok:
        return ok, why
    if p.k % 16 or p.n % 16:
        return False, f"torch._scaled_mm needs K and N divisible by 16 (K={p.k}, N={p.n})"
    return True, ""


def scaled_mm_fp8(xq, xs, w, ws, bias, out_dtype):
    return bind_scaled_mm(_problem_of(xq, xs, w, ws, bias, out_dtype), w, ws, bias)(xq, xs)


def runs_tensor_wise(p: GemmProblem) -> bool:
    """Whether ``torch._scaled_mm`` takes ``p`` with one scale each: one weight scale and one activation scale
    (a per-tensor one, or a per-token one of one token)."""
    return not p.per_channel and (not p.per_token or p.m == 1)


def scaled_mm_ways(p: GemmProblem) -> tuple[str, ...]:
    """The ways ``torch._scaled_mm`` can run ``p``: tensor-wise where ``runs_tensor_wise``; else row-wise
    (bf16 output only) and the fp32 product plus epilogue."""
    if runs_tensor_wise(p):
        return (SCALED_MM_TENSOR_WISE,)
    return (SCALED_MM_ROW_WISE, SCALED_MM_FP32) if p.out_dtype == torch.bfloat16 else (SCALED_MM_FP32,)


def scaled_mm_way(p: GemmProblem) -> str:
    """How ``bind_scaled_mm`` runs a problem: its one way of ``scaled_mm_ways``, or of row-wise and the fp32
    product plus epilogue the one the sweep measured faster at the problem's nearest swept shape and M
    bucket (row-wise where it measured neither: above the last bucket, archs not swept). The sweep times
    per-token problems; a per-tensor activation with per-channel weights takes their choice (its row-wise
    call also expands the scale to ``[M, 1]``, one copy kernel more than the sweep timed)."""
    ways = scaled_mm_ways(p)
    if len(ways) == 1:
        return ways[0]
    row, _ = _device_row(p)
    times = row["torch_all"] if row else {}
    if times.get(SCALED_MM_FP32, math.inf) < times.get(SCALED_MM_ROW_WISE, math.inf):
        return SCALED_MM_FP32
    return SCALED_MM_ROW_WISE


def _expanded_scale(ws: torch.Tensor, n: int) -> torch.Tensor:
    """A one-element weight scale as the ``[1, N]`` row-wise scale ``torch._scaled_mm`` takes (a copy)."""
    return ws.reshape(1, 1).expand(1, n).contiguous()


def bind_scaled_mm(p: GemmProblem, w, ws, bias, way: str | None = None):
    """``torch._scaled_mm`` for a layer's weight, the ``scaled_mm_way`` of its problem (``way`` overrides
    it: sweeps, tests); the transposed weight view and the scale views made once."""
    ways = scaled_mm_ways(p)
    way = way or scaled_mm_way(p)
    if way not in ways:
        raise ValueError(f"torch._scaled_mm runs this problem in one of {', '.join(ways)} "
                         f"({', '.join(SCALED_MM_WAYS)} in all), got {way!r}")
    n, m, out_dtype, per_token = p.n, p.m, p.out_dtype, p.per_token
    wt = w.t()
    if way == SCALED_MM_TENSOR_WISE:
        ws_scalar = ws.reshape(())

        def call(xq, xs):  # xs: one element of any shape
            out = torch._scaled_mm(xq, wt, scale_a=xs.reshape(()), scale_b=ws_scalar, out_dtype=out_dtype)
            return out if bias is None else out + bias

    elif way == SCALED_MM_ROW_WISE:  # CUTLASS's row-wise kernel: both scales row-wise, bf16 out
        # torch._scaled_mm takes contiguous row-wise scales: a bound layer's weight scale is (gemm.bind_gemm); the
        # checked entry binds for one call, so a copy made here is as fresh as the call
        ws_row = ws.reshape(1, -1).contiguous() if ws.numel() == n else None
        # a one-element weight scale's (version, [1, N] copy), read and replaced as one, per stream: each made on the
        # stream that reads it, so that when it is replaced or the bound call goes, the caching allocator hands its
        # memory out again on that stream alone, never while another stream's kernel may still read it (two
        # streams running one layer's calls side by side, as overlapped micro-batches do)
        kept: dict = {}
        index = launch.device_index(w.device)
        stream_of = dl.raw_stream if index >= 0 else _no_stream  # tests' stand-ins run on the CPU: no stream

        def call(xq, xs):  # xs: [M, 1] per token (already row-wise), else one element, expanded
            if per_token:
                scale_a = xs if xs.is_contiguous() else xs.contiguous()
            else:
                scale_a = xs.reshape(1, 1).expand(m, 1).contiguous()
            scale_b = ws_row
            if scale_b is None and capturing():  # a copy of its own, made again at each replay
                scale_b = _expanded_scale(ws, n)
            elif scale_b is None:  # kept while the layer's scale keeps its version (an inference tensor has none)
                stream = stream_of(index)
                version, seen = (None if ws.is_inference() else ws._version), kept.get(stream)
                if seen is None or version is None or seen[0] != version:
                    seen = (version, _expanded_scale(ws, n))
                    if version is not None:
                        kept[stream] = seen
                scale_b = seen[1]
            out = torch._scaled_mm(xq, wt, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
            return out if bias is None else out + bias

    else:  # the fp32 product (cuBLAS, unit scales), then the scales and the bias in one Triton kernel
        ws_arg, bias_arg = _fixed_operands(ws, bias)
        epilogue, scalars = _epilogue_call(p, 1), (m, n, 1, n)
        shape, strides, device = (m, n), (n, 1), w.device
        # the unit scale, the call's own: made when bound, unless that is under CUDA graph capture, where it would
        # be filled only at replay; then each call makes one until a call outside capture makes the one it keeps.
        # Not one per device for the process's life: under torch.compile(mode="reduce-overhead") the checked entry
        # binds inside the CUDA-graph trees' warm-up, whose pool takes every allocation of the thread, and a tensor
        # kept past that call is refused there (H100, benchmarks/RESULTS.md, forty-fifth round)
        one = None if capturing() else torch.ones((), dtype=torch.float32, device=device)

        def call(xq, xs):
            nonlocal one
            unit = one
            if unit is None:
                unit = torch.ones((), dtype=torch.float32, device=device)
                if not capturing():
                    one = unit
            acc = torch._scaled_mm(xq, wt, scale_a=unit, scale_b=unit, out_dtype=torch.float32)
            xs = xs if xs.is_contiguous() else xs.contiguous()  # the kernel reads xs[m] at xs_ptr + m
            out = torch.empty_strided(shape, strides, dtype=out_dtype, device=device)
            epilogue((acc, xs, ws_arg, bias_arg, out), scalars)
            return out

    return call


def int_mm_supported(p: GemmProblem) -> tuple[bool, str]:
    ok, why = _on_gpu(p)
    if not ok:
        return ok, why
    if p.m <= 16 or p.k % 8 or p.n % 8:
        return False, f"torch._int_mm needs M > 16 and K, N divisible by 8 (M={p.m}, K={p.k}, N={p.n})"
    return True, ""


def int_mm_int8(xq, xs, w, ws, bias, out_dtype):
    return dequant_epilogue(torch._int_mm(xq, w.t()), xs, ws, bias, out_dtype)


def bind_int_mm(p: GemmProblem, w, ws, bias):
    wt, ws_row, out_dtype = w.t(), ws.reshape(1, -1), p.out_dtype
    return lambda xq, xs: dequant_epilogue(torch._int_mm(xq, wt), xs, ws_row, bias, out_dtype)


def triton_int8_supported(p: GemmProblem) -> tuple[bool, str]:
    return _on_gpu(p)


_data_ptr = torch.Tensor.data_ptr


class KernelCall:
    """One Triton kernel launch for fixed operand metadata (sizes, strides, dtypes, device) and fixed scalars:
    through Triton's JIT until it has compiled the kernel for 16-byte aligned operands, then directly
    (``direct_launch``), like the producers' bound launches. The direct launch runs the kernel compiled for the
    first scalars, which Triton specializes (a 1 is compiled in), so one object never serves two sets of them.
    Holds no tensors."""

    __slots__ = ("plan", "index", "direct")

    def __init__(self, plan, index: int):
        self.plan, self.index, self.direct = plan, index, None

    def __call__(self, tensors: tuple, scalars: tuple, ptrs: tuple | None = None) -> None:
        """``tensors``: the kernel's pointer (or tensor descriptor) arguments, which come first in every GEMM
        kernel's signature; ``scalars``: the runtime arguments after them; ``ptrs``: the tensors' addresses where
        the caller has read them (an operand passed twice is read once), all 16-byte aligned, else None. A call
        with descriptors passes them in ``ptrs`` as well, their tensors and the other operands 16-byte aligned.
        The direct launch runs the kernel compiled for 16-byte aligned operands (this object is shared
        by every layer of the problem's shape), given the pointers' addresses."""
        if ptrs is None:
            ptrs = tuple(map(_data_ptr, tensors))
            aligned = not functools.reduce(operator.or_, ptrs) & 15
        else:
            aligned = True
        direct = self.direct
        if direct is not None and aligned and dl.may_run_now(launch._tl()[2], self.index, None, None):
            dl.run(direct, self.index, (*ptrs, *scalars, *self.plan.consts))
            return
        compiled = launch._launch(self.plan, (*tensors, *scalars))
        if (compiled is not None and aligned and not dl._HIP and self.index >= 0
                and dl._current_device() == self.index):
            self.direct = dl.direct_of(compiled, self.plan.grid, self.index)

    def fits(self, dtypes: tuple, scalars: tuple) -> bool:
        """Whether the kernel, compiled now for 16-byte aligned operands of ``dtypes`` (the pointer arguments'
        dtypes) and ``scalars``, takes no more shared memory than a block of its device may. Triton compiles a
        kernel at its first launch and refuses one that does not fit there, deep in a call; a bind asks here
        first. The first call finds the kernel compiled. True in the interpreter (no shared memory)."""
        if self.index < 0 or launch._interpreting():
            return True
        plan = self.plan
        compiled = plan.kernel.warmup(*dtypes, *scalars, grid=plan.grid, **plan.kwargs)
        return compiled.metadata.shared <= launch.max_shared_memory(self.index)


def _scale_flags(p: GemmProblem) -> dict:
    # a one-element scale is read as a scalar unless it is the single row / column it stands for
    return dict(XS_PER_TOKEN=p.per_token or p.m == 1, WS_PER_CHANNEL=p.per_channel or p.n == 1,
                HAS_BIAS=p.has_bias, OUT=launch._tl()[1][p.out_dtype])


def int8_gemm_rows(index: int) -> tuple:
    """The Triton int8 GEMM's tile rows on CUDA device ``index``: its model's own (``INT8_GEMM_DEVICE_CONFIGS``)
    where measured, else ``INT8_GEMM_CONFIGS``; those for the interpreter's CPU tensors (index -1)."""
    if index < 0 or not INT8_GEMM_DEVICE_CONFIGS:
        return INT8_GEMM_CONFIGS
    return INT8_GEMM_DEVICE_CONFIGS.get(launch.device_name(index), INT8_GEMM_CONFIGS)


def int8_gemm_row(p: GemmProblem) -> tuple:
    """The tile row of ``p``'s M (its first field, max_m, dropped)."""
    for row in int8_gemm_rows(launch.device_index(p.device)):
        if p.m <= row[0]:
            return row[1:]
    raise ValueError(f"no int8 GEMM tile row covers M = {p.m}")  # every table's last row covers any M (tested)


TMA_MIN_CAPABILITY = (9, 0)  # the tensor memory accelerator: Hopper and later


def tma_arch_ok(arch: str | None) -> bool:
    """Whether an NVIDIA arch (``sm_XY``) has the TMA; False for any other (ROCm's ``gfx...``, unknown)."""
    from fused_quant.platforms import sm_at_least

    return sm_at_least(arch, TMA_MIN_CAPABILITY)


def tma_ok(p: GemmProblem, w: torch.Tensor) -> tuple[bool, str]:
    """Whether the descriptor kernel may read ``p``'s operands: an NVIDIA GPU of SM90+ (or the interpreter),
    a Triton with host tensor descriptors, and row strides and a weight address the TMA can take (16-byte
    multiples; the activation's own address is checked per call)."""
    index = launch.device_index(p.device)
    if dl._HIP:
        return False, "ROCm has no TMA"
    if not (p.m and p.n and p.k):
        return False, f"an empty problem (M, N, K = {p.m}, {p.n}, {p.k}): a descriptor has no zero-sized dimension"
    if index >= 0 and not tma_arch_ok(launch._cuda_arch(index)):
        return False, f"the TMA needs SM90+, this GPU is {launch._cuda_arch(index)}"
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False, "this Triton has no host tensor descriptors"
    if w.stride(1) != 1:
        return False, f"weight strides {w.stride()}: K is not the contiguous dimension"
    if p.k % 16 or w.stride(0) % 16:
        return False, f"K = {p.k}, weight strides {w.stride()}: rows not in 16-byte multiples"
    if w.data_ptr() % 16:
        return False, "the weight's address is not 16-byte aligned"
    return True, ""


def _triton_int8_call(p: GemmProblem, tma: bool = False) -> KernelCall:
    """The int8 GEMM's launch for ``p`` in its row's tile: through tensor descriptors (``tma``, where the row
    says so and the caller found them possible) or pointers."""
    key = ("triton_int8", p, tma)
    call = _GEMM_LAUNCHES.get(key)
    if call is not None:
        return call
    from fused_quant.kernels.triton import int8_gemm

    generation = runtime.generation()
    index = launch.device_index(p.device)
    bm, bn, bk, gm, warps, stages, loads = int8_gemm_row(p)
    tiles = -(-p.m // bm) * -(-p.n // bn)
    kwargs = dict(_scale_flags(p), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps,
                  num_stages=stages, **launch.pdl_options(index))
    if tma:
        programs = min(tiles, launch._num_sms(index)) if loads.startswith("tma persistent") else tiles
        kwargs["FLATTEN"] = loads == "tma persistent flat"
        plan = launch.make_plan(int8_gemm.scaled_int8_gemm_tma_kernel, (programs,), kwargs, "int8_gemm_tma")
    else:
        plan = launch.make_plan(int8_gemm.scaled_int8_gemm_kernel, (tiles,), kwargs, "int8_gemm")
    return _GEMM_LAUNCHES.put(key, KernelCall(plan, index), generation)


# GEMM kernel launches by (provider, problem[, config override]): metadata and compiled kernels only
_GEMM_LAUNCHES = runtime.Cache("gemm_launches")


def _fixed_operands(ws, bias):
    """A layer's scale and bias as the Triton GEMMs read them (contiguous, ``ws[n]`` at ``ws_ptr + n``) and
    the bias argument (the scale stands in for a missing bias)."""
    ws = ws if ws.is_contiguous() else ws.contiguous()
    bias = bias if bias is None or bias.is_contiguous() else bias.contiguous()
    return ws, bias if bias is not None else ws


def gemm_scalars(p: GemmProblem, w: torch.Tensor) -> tuple:
    """The runtime scalars after the pointers of both Triton GEMM kernels: ``M, N, K``, then the row
    strides of the activation (contiguous ``[M, K]``), the weight and the output (contiguous ``[M, N]``)."""
    return (p.m, p.n, p.k, p.k, w.stride(0), p.n)


def bind_triton_int8(p: GemmProblem, w, ws, bias):
    """The Triton int8 GEMM for one layer: through tensor descriptors where its row says so and ``tma_ok``
    (the weight's descriptor made here, the activation's per call: an activation not 16-byte aligned, or an
    operand the pointer kernel would read unaligned, takes the pointer kernel, in the same tile), else pointers."""
    ws, bias_arg = _fixed_operands(ws, bias)
    shape, strides, device, out_dtype = (p.m, p.n), (p.n, 1), w.device, p.out_dtype
    scalars = gemm_scalars(p, w)
    kernel = _triton_int8_call(p)
    tma = None
    if int8_gemm_row(p)[-1] != "pointers" and tma_ok(p, w)[0]:
        from triton.tools.tensor_descriptor import TensorDescriptor

        tma = _triton_int8_call(p, tma=True)
        blocks = tma.plan.kwargs  # the launch's own tile: the blocks its descriptors must have
        bm, bn, bk = blocks["BLOCK_M"], blocks["BLOCK_N"], blocks["BLOCK_K"]
        w_desc = TensorDescriptor(w, [p.n, p.k], [w.stride(0), 1], [bn, bk])
        x_box, x_shape, x_strides = [bm, bk], [p.m, p.k], [p.k, 1]
        tma_scalars = (p.m, p.n, p.k, p.n, tma.plan.grid[0])

    def call(xq, xs):
        xs = xs if xs.is_contiguous() else xs.contiguous()  # the kernel reads xs[m] at xs_ptr + m
        out = torch.empty_strided(shape, strides, dtype=out_dtype, device=device)
        if tma is not None:
            xp, xsp, wsp, bp, op = xq.data_ptr(), xs.data_ptr(), ws.data_ptr(), bias_arg.data_ptr(), out.data_ptr()
            if not (xp | xsp | wsp | bp | op) & 15:
                x_desc = TensorDescriptor(xq, x_shape, x_strides, x_box)
                tma((x_desc, w_desc, xs, ws, bias_arg, out), tma_scalars, (x_desc, w_desc, xsp, wsp, bp, op))
                return out
        kernel((xq, w, xs, ws, bias_arg, out), scalars)
        return out

    return call


def triton_int8(xq, xs, w, ws, bias, out_dtype):
    return bind_triton_int8(_problem_of(xq, xs, w, ws, bias, out_dtype), w, ws, bias)(xq, xs)


def _problem_of(xq, xs, w, ws, bias, out_dtype) -> GemmProblem:
    """The problem of a provider call (``[M, K]`` operands, already checked by the entry)."""
    kind = "int8" if xq.dtype == torch.int8 else "fp8"
    return GemmProblem(xq.shape[0], w.shape[0], xq.shape[1], kind, xq.dtype, out_dtype, xq.device,
                       xs.numel() != 1, ws.numel() != 1, bias is not None)


# --- the small-M weight-streaming GEMM ------------------------------------------------------------

def m_bucket(m: int) -> int | None:
    """The swept token count a problem of M tokens uses (the next one up), None above the last."""
    return next((b for b in M_BUCKETS if m <= b), None)


def config_table(path: Path) -> dict:
    """``{(arch, kind, model): {(n, k): {m_bucket: row}}, "metas": {arch: meta}, "models": {model: meta}}`` from
    the sweep's committed output (read once per runtime generation): ``model`` None for the arch's rows, a GPU
    model's name (as CUDA reports it) for that model's own rows (a row's ``"device"``)."""
    return runtime.once(f"small_m_configs:{path}", lambda: _read_table(path))


def table_metas(path: Path | None = None) -> dict[str, dict]:
    """``{arch: what its rows were swept on}`` (the GPU's name, versions, date) from the same output (by default
    ``SMALL_M_CONFIG_FILE``, read when called)."""
    return config_table(SMALL_M_CONFIG_FILE if path is None else path).get("metas", {})


def model_metas(path: Path | None = None) -> dict[str, dict]:
    """``{GPU model: what its own rows were measured with}`` (versions, date, whether a retime of the arch's
    configs) from the same output."""
    return config_table(SMALL_M_CONFIG_FILE if path is None else path).get("models", {})


def rows_since(arch: str, model: str | None, path: Path | None = None) -> int:
    """How many of ``arch``'s rows (``model``'s own, or the arch's where None) a later part-sweep installed after the
    meta that describes them (``table_metas`` / ``model_metas``): rows stamped (``"swept"``, ``"retimed"``) otherwise
    than that meta's own install would stamp them."""
    table = config_table(SMALL_M_CONFIG_FILE if path is None else path)
    meta = (table.get("metas", {}) if model is None else table.get("models", {})).get(model or arch, {})
    own_stamp = f"{meta.get('device')} {meta.get('date')}"
    return sum("swept" in row and (row["swept"] != own_stamp or bool(row.get("retimed")) != bool(meta.get("retime")))
               for key, shapes in table.items() if isinstance(key, tuple) and key[0] == arch and key[2] == model
               for by_m in shapes.values() for row in by_m.values())


def _read_table(path: Path) -> dict:
    """``config_table``'s reading of ``path``, each row checked (``check_rows``): a malformed table is a ValueError
    naming the file and the row, never a config that fails inside a kernel or a row read another way."""
    table: dict = {}
    if not path.is_file():
        return table
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"small-M config table {path} cannot be read: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"small-M config table {path}: expected a JSON object with a list of rows, got "
                         f"{type(data).__name__}{' without rows' if isinstance(data, dict) else ''}")
    if "meta" in data and "metas" not in data:
        raise ValueError(f"small-M config table {path} is a sweep's output (its \"meta\"), not an installed table: "
                         "benchmarks/sweep_small_m_gemm.py --install merges it into one")
    # the GEMM table's rows decide between the small-M GEMM and the torch providers by their times
    check_rows(data["rows"], str(path), timed=path == SMALL_M_CONFIG_FILE)
    for row in data["rows"]:
        key = (row["arch"], row["kind"], row.get("device"))
        table.setdefault(key, {}).setdefault((row["n"], row["k"]), {})[row["m"]] = row
    table["metas"], table["models"] = data.get("metas", {}), data.get("models", {})
    return table


# the warp counts a Triton launch takes
NUM_WARPS = (1, 2, 4, 8, 16, 32)
# tl.dot's smallest block on each side: a token block of 2-8 has no MMA (the kernel takes 1, or 16 and more)
MMA_MIN_BLOCK = 16


def check_rows(rows: list, where: str, timed: bool = True) -> None:
    """Check the rows of a small-M config table (the installed one, a sweep's output) at ``where``: each an
    arch, a kind (fp8 / int8), positive N and K, M one of ``M_BUCKETS``, a config (``CONFIG_FIELDS``: positive
    integers, blocks and warps powers of two), a finite positive time (``us``), with ``timed`` the torch
    providers' times the row is weighed against (``torch_all``), and no two rows for one problem of one GPU
    model or arch. A ValueError names the first row that is not so."""
    seen: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        why = _row_problem(row, timed)
        if why:
            label = (f" ({row.get('kind')} N={row.get('n')} K={row.get('k')} M={row.get('m')})"
                     if isinstance(row, dict) else "")
            raise ValueError(f"small-M config table {where}: row {i}{label}: {why}")
        key = (row["arch"], row["kind"], row.get("device"), row["n"], row["k"], row["m"])
        if key in seen:
            raise ValueError(f"small-M config table {where}: rows {seen[key]} and {i} are both {row['kind']} "
                             f"N={row['n']} K={row['k']} M={row['m']} on {row.get('device') or row['arch']}")
        seen[key] = i


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _row_problem(row: object, timed: bool) -> str:
    """Why ``row`` is not a row ``check_rows`` takes ("" where it is)."""
    if not isinstance(row, dict):
        return f"expected an object, got {type(row).__name__}"
    if not isinstance(row.get("arch"), str) or not row["arch"]:
        return f"expected an arch name, got {row.get('arch')!r}"
    if row.get("device") is not None and (not isinstance(row["device"], str) or not row["device"]):
        return f"expected a GPU model's name as its device (or none), got {row['device']!r}"
    if row.get("kind") not in ("fp8", "int8"):
        return f"expected kind fp8 or int8, got {row.get('kind')!r}"
    for field in ("n", "k"):
        if not _count(row.get(field)):
            return f"expected a positive integer {field}, got {row.get(field)!r}"
    if not _count(row.get("m")) or row["m"] not in M_BUCKETS:
        return f"expected m one of the buckets {M_BUCKETS}, got {row.get('m')!r}"
    for field in CONFIG_FIELDS:
        value = row.get(field)
        if not _count(value):
            return f"expected a positive integer {field}, got {value!r}"
        if field.startswith("BLOCK_") and value & (value - 1):
            return f"expected {field} a power of two, got {value}"
    if row["num_warps"] not in NUM_WARPS:
        return f"expected num_warps one of {NUM_WARPS}, got {row['num_warps']}"
    small = [f for f in ("BLOCK_M", "BLOCK_N", "BLOCK_K") if row[f] < MMA_MIN_BLOCK]
    if row["BLOCK_M"] > 1 and small:  # a token block of more than one goes through tl.dot
        return (f"expected BLOCK_M 1 (no MMA) or BLOCK_M, BLOCK_N and BLOCK_K each at least {MMA_MIN_BLOCK} (an MMA "
                f"tile), got {', '.join(f'{f}={row[f]}' for f in small)}")
    if not _time(row.get("us")):
        return f"expected a finite positive time us, got {row.get('us')!r}"
    if timed:
        times = row.get("torch_all")
        if not isinstance(times, dict) or not times:
            return f"expected the torch providers' times (torch_all), got {times!r}"
        bad = {name: us for name, us in times.items() if not _time(us)}
        if bad:
            return f"expected finite positive torch times, got {bad}"
    return ""


def _distance(shape: tuple[int, int], n: int, k: int) -> Fraction:
    """How far a swept (N, K) is from a problem's: the product of the two ratios, larger over smaller (1 for the
    same shape; its log2 is the sum of the log2 ratios). Exact: two shapes as near compare equal."""
    return Fraction(max(shape[0], n), min(shape[0], n)) * Fraction(max(shape[1], k), min(shape[1], k))


def torch_time(row: dict, names: tuple[str, ...] | None = None) -> tuple[str | None, float]:
    """The best time the sweep measured among the torch providers ``names`` (None: all it timed); (None, inf)
    where it timed none of them (a row of an older sweep, which did not time every way)."""
    times = {name: us for name, us in row["torch_all"].items() if names is None or name in names}
    if not times:
        return None, math.inf
    name = min(times, key=times.get)
    return name, times[name]


def torch_peers(p: GemmProblem, backend: str | None = None) -> tuple[str, ...] | None:
    """What ``backend``'s chain would run ``p`` with instead of the small-M GEMM, by the names of the sweep's
    times: the first provider after the small-M one in the chain that takes ``p`` (the chains order them
    differently: ``torch._int_mm`` comes first on ``hip_w8a8``), ``torch._scaled_mm`` as its ways for ``p``;
    () where no later provider takes ``p`` (the small-M GEMM is what the chain has). A later provider the
    sweep did not time (a user's) does not make the small-M GEMM yield (``torch_time``). Without a backend,
    without the small-M GEMM in its chain, or asked again while a later provider's predicate is being asked
    (one that reuses this predicate): ``torch._scaled_mm``'s ways for FP8 and None (every provider the sweep
    timed) for int8, asking no provider."""
    outside = scaled_mm_ways(p) if p.kind == "fp8" else None
    chain = gemm_providers(backend, p.kind) if backend is not None else []
    names = [provider.name for provider in chain]
    key = (p, backend)
    asking = _ASKING.__dict__.setdefault("keys", set())
    if f"small_m_{p.kind}" not in names or key in asking:
        return outside
    after = chain[names.index(f"small_m_{p.kind}") + 1:]
    asking.add(key)
    try:
        taker = next((provider.name for provider in after if provider.check(p)[0]), None)
    finally:
        asking.discard(key)
    if taker is None:
        return ()
    return scaled_mm_ways(p) if taker == "scaled_mm_fp8" else (taker,)


# the (problem, backend) pairs whose later providers ``torch_peers`` is asking, per thread
_ASKING = threading.local()


def _swept_row(arch: str | None, kind: str, n: int, k: int, m: int, path: Path | None = None,
               model: str | None = None) -> tuple[dict | None, str]:
    """(the sweep's row at M's bucket for the nearest (N, K) swept at that bucket on ``arch``, "") or (None, why
    none), from the table at ``path`` (by default ``SMALL_M_CONFIG_FILE``). GPU ``model``'s own rows and the arch's
    are searched together and the nearest shape answers, a tie going to the model's own row: its own row of the same
    shape first, then the arch's row of that shape (a shape swept into the arch's rows, README's ``--model``, serves
    a model with rows of other shapes), then the nearest of either. A shape swept at some buckets only (``--ms``) is
    the nearest at those: at the others a fully swept shape answers (on an H100 the problems at a bucket a partial
    sweep had skipped otherwise fell to torch providers 1.06-1.51x as slow, benchmarks/RESULTS.md, thirty-fifth
    round)."""
    if n <= 0 or k <= 0:
        return None, f"N and K must be positive, got N={n} K={k}"
    bucket = m_bucket(m)
    if bucket is None:
        return None, f"M={m} is above the small-M GEMM's largest bucket {M_BUCKETS[-1]}"
    path = SMALL_M_CONFIG_FILE if path is None else path
    # asked on every checked FP8 call (``scaled_mm_way``): the search over the swept shapes runs once per generation
    key = ("swept_row", path, arch, kind, n, k, bucket, model)
    found = _GEMM_LAUNCHES.get(key)
    if found is None:
        generation = runtime.generation()
        found = _GEMM_LAUNCHES.put(key, _search_rows(config_table(path), arch, kind, n, k, bucket, model), generation)
    return found


def _search_rows(table: dict, arch: str | None, kind: str, n: int, k: int, bucket: int,
                 model: str | None) -> tuple[dict | None, str]:
    """``_swept_row``'s search of ``table`` at M bucket ``bucket``."""
    tables = [table.get((arch, kind, owner)) for owner in ((model, None) if model is not None else (None,))]
    if not any(tables):
        return None, (f"no measured {kind} small-M configs for {arch} "
                      "(run benchmarks/sweep_small_m_gemm.py on this arch)")
    swept = [(_distance(nk, n, k), rank, nk) for rank, shapes in enumerate(tables) if shapes
             for nk, rows in shapes.items() if bucket in rows]
    if not swept:
        return None, f"no {kind} config swept at M bucket {bucket} on {arch}"
    _, rank, nk = min(swept)
    return tables[rank][nk][bucket], ""


def small_m_config(arch: str | None, kind: str, n: int, k: int, m: int,
                   peers: tuple[str, ...] | None = None, model: str | None = None) -> tuple[dict | None, str]:
    """(config, "") where the sweep measured the small-M GEMM faster than the torch providers ``peers``
    (``torch_peers``; None: all it timed; (): none, the row's config) for the nearest swept (N, K) at M's
    bucket on ``arch`` (GPU ``model``'s own rows and the arch's together, ``_swept_row``); else (None, why not)."""
    row, why = _swept_row(arch, kind, n, k, m, model=model)
    if row is None:
        return None, why
    return _faster_config(row, peers)


def _faster_config(row: dict, peers: tuple[str, ...] | None) -> tuple[dict | None, str]:
    """(``row``'s config, "") where its time beats the best of ``peers`` (``small_m_config``'s), else (None, why)."""
    peer, peer_us = torch_time(row, peers)
    if row["us"] >= peer_us:
        return None, (f"{peer} measured faster at M bucket {row['m']} for N={row['n']} K={row['k']} "
                      f"({peer_us:.1f} vs {row['us']:.1f} us)")
    return {f: row[f] for f in CONFIG_FIELDS}, ""


def _device_arch(device: torch.device) -> str | None:
    """The arch the config table is keyed on: ``sm_XY`` of a CUDA device; on ROCm the platform's gfx
    name (torch reports NVIDIA-like capabilities there, which must not pick an NVIDIA sweep)."""
    if device.type != "cuda":
        return None
    if dl._HIP:
        from fused_quant.platforms import current_platform

        return current_platform().arch
    return launch._cuda_arch(launch.device_index(device))


def _device_model(device: torch.device) -> str | None:
    """The GPU model whose own rows the config table may hold for ``device`` (the name CUDA reports); None off the
    GPU and where torch has no CUDA runtime to ask (a CPU build: nothing of a "cuda" problem runs there)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return launch.device_name(launch.device_index(device))


def _device_row(p: GemmProblem) -> tuple[dict | None, str]:
    """``_swept_row`` for ``p`` on its device: its GPU model's own rows where they have one, else its arch's."""
    return _swept_row(_device_arch(p.device), p.kind, p.n, p.k, p.m, model=_device_model(p.device))


def _row_config(p: GemmProblem) -> tuple[dict | None, str]:
    """``small_m_config`` of ``p``'s row on its device with no torch provider to compare (``()``): the config a
    bind takes once the predicate has decided."""
    return small_m_config(_device_arch(p.device), p.kind, p.n, p.k, p.m, (), _device_model(p.device))


def _row_of(p: GemmProblem) -> tuple[dict | None, str]:
    """(the table's row for ``p``, "") on a GPU, or (None, why none)."""
    ok, why = _on_gpu(p)
    return _device_row(p) if ok else (None, why)


def small_m_supported_in(backend: str | None):
    """The small-M providers' predicate in ``backend``'s chain: a problem where the sweep measured the small-M
    GEMM faster than what the chain would run instead (``torch_peers``, asked only where the table has a row)."""
    def supported(p: GemmProblem) -> tuple[bool, str]:
        row, why = _row_of(p)
        if row is None:
            return False, why
        cfg, why = _faster_config(row, torch_peers(p, backend))
        return cfg is not None, why

    return supported


def small_m_swept(p: GemmProblem) -> tuple[bool, str]:
    """Whether the small-M GEMM can run ``p``: a GPU problem whose arch, nearest swept shape and M bucket have
    a config in the table (faster than the torch providers or not: what benchmarks time it on)."""
    row, why = _row_of(p)
    return row is not None, why


small_m_supported = small_m_supported_in(None)  # outside a chain: faster than every torch provider timed


# The quantizer constexprs of a small-M GEMM whose activation comes quantized (``XQ`` = NO_XQ: unused)
_NO_XQ = dict(XQ=-1, M8=0.0, NAN_CODE=0, SATFINITE=False, FAST_DIV=False, MIN_SCALE=0.0)
# The output producer's constexprs of a small-M GEMM that stores its output as it is (``ACT_Q`` = NO_XQ)
_NO_ACT_Q = dict(ACT_Q=-1, ROUND_PRODUCT=False, FAST_SILU=False, Y_M8=0.0, Y_NAN_CODE=0, Y_SATFINITE=False,
                 Y_FAST_DIV=False)
# The producer constexprs ``_act_constexprs`` reads from a silu_and_mul producer's launch: the small-M kernel's
# names for them (the quantizer's take a Y_ prefix: the kernel's own names are its input quantizer's)
_ACT_Q_FROM = (("ACT_Q", "QUANT"), ("ROUND_PRODUCT", "ROUND_PRODUCT"), ("FAST_SILU", "FAST_SILU"), ("Y_M8", "M8"),
               ("Y_FP8", "FP8"), ("Y_NAN_CODE", "NAN_CODE"), ("Y_SATFINITE", "SATFINITE"),
               ("Y_FAST_DIV", "FAST_DIV"))


def _quantizer_constexprs(x_quant: tuple | None, p: GemmProblem, index: int) -> dict:
    """The small-M kernel's ``XQ`` and quantizer arguments: those of the identity producer for ``x_quant``
    = (key name, float dtype of x), as ``launch`` builds them for it."""
    fp8 = p.x_dtype if p.kind == "fp8" else torch.float8_e4m3fn  # int8: FP8 is a placeholder
    if x_quant is None:
        return dict(_NO_XQ, FP8=launch._tl()[1][fp8])
    key_name, x_dtype = x_quant
    # as the identity producer's launch (FAST_DIV on): static FP8 multiplies by the reciprocal, static int8
    # takes the fast quotient for scales in its proven range and div_rn outside it (act_quant.static_quantized),
    # per-token keys quantize as the token producers do
    c = launch._constexprs("identity", key_name, x_dtype, False, fp8, True, launch.nvidia_device(index), False)
    return dict(XQ=c["QUANT"], M8=c["M8"], FP8=c["FP8"], NAN_CODE=c["NAN_CODE"], SATFINITE=c["SATFINITE"],
                FAST_DIV=c["FAST_DIV"], MIN_SCALE=c.get("MIN_SCALE", 0.0))


def _act_constexprs(y_quant: tuple | None) -> dict:
    """The small-M kernel's ``ACT_Q`` and its output producer's arguments: ``y_quant`` holds the silu_and_mul
    producer launch's own constexprs (``producing_of``), so the GEMM computes what that launch would."""
    if y_quant is None:
        return dict(_NO_ACT_Q, Y_FP8=launch._tl()[1][torch.float8_e4m3fn])  # FP8: a placeholder
    c = dict(y_quant)
    return {name: c[theirs] for name, theirs in _ACT_Q_FROM}


def sweep_width(cfg: dict, k: int) -> int:
    """The K width of a per-token quantizing call's absmax sweep tile ``[BLOCK_M, SWEEP_K]``: 64 floats a thread of
    the config's warps, at least BLOCK_K, at most K's next power of two. Each program sweeps before its weight
    streams, one dependent step per tile; in BLOCK_K tiles Llama-3-8B's gate_up took 32 steps at a 16-token block."""
    wide = SWEEP_LANE_FLOATS * 32 * cfg["num_warps"] // cfg["BLOCK_M"]
    return max(cfg["BLOCK_K"], min(wide, 1 << (k - 1).bit_length()))


def one_split(cfg: dict, k: int) -> int:
    """The K splits a config runs with at K (no more than K has blocks)."""
    return max(1, min(cfg["splits"], -(-k // cfg["BLOCK_K"])))


class SmallMCall:
    """The small-M GEMM for one problem and config: the main kernel and, with split-K, the kernel that
    sums the partials in order and applies the epilogue (``reduce``), and the main kernel whose last
    split of each tile does that itself (``fused``: the same sum in the same order, the same bits, one
    launch). With ``x_quant`` = (key name, float dtype) the main kernel takes the activation as floats
    and quantizes it as the identity producer of that key would; for a per-token key it works out the
    scales itself (``own_scales``). Holds no tensors."""

    __slots__ = ("main", "reduce", "fused", "splits", "acc_dtype", "part_shape", "part_strides", "own_scales",
                 "tiles")

    def __init__(self, p: GemmProblem, cfg: dict, x_quant: tuple | None = None, y_quant: tuple | None = None):
        from fused_quant.kernels.triton import small_m_gemm as kernels

        bn, bm, bk = cfg["BLOCK_N"], cfg["BLOCK_M"], cfg["BLOCK_K"]
        splits = one_split(cfg, p.k)
        if y_quant is not None and splits > 1:
            raise ValueError(f"the small-M GEMM applies its output's producer with one K split, the config has "
                             f"{splits}")
        if y_quant is not None and (bn < 2 or bn % 2):
            raise ValueError(f"the small-M GEMM applies its output's producer to blocks of gate and up columns, an "
                             f"even BLOCK_N; the config has BLOCK_N={bn}")
        int8 = p.kind == "int8"
        flags = _scale_flags(p)
        # with the output's silu_and_mul an N block holds BLOCK_N / 2 gate columns and as many up columns
        n_blocks = -(-p.n // bn) if y_quant is None else -(-(p.n // 2) // (bn // 2))
        m_blocks = -(-p.m // bm)
        first = tokens_first(m_blocks, n_blocks)
        grid = (m_blocks, n_blocks, splits) if first else (n_blocks, m_blocks, splits)
        index = launch.device_index(p.device)
        pdl = launch.pdl_options(index)
        k_blocks = -(-p.k // bk)
        k_bytes = min(-(-k_blocks // splits) * bk, p.k)  # of each weight row, per program (one-byte elements)
        prefetch = prefetch_lines(bn, n_blocks * splits, k_bytes, bool(pdl["PDL"]))
        kwargs = dict(flags, INT8=int8, SPLIT=splits > 1, LAST_REDUCES=False, EVEN_K=p.k % bk == 0,
                      BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, IMPRECISE=0 if int8 else min(FP8_IMPRECISE_ACC, bk),
                      **_quantizer_constexprs(x_quant, p, index), **_act_constexprs(y_quant),
                      SWEEP_K=sweep_width(cfg, p.k) if x_quant is not None and p.per_token else bk,
                      PREFETCH=prefetch, EVICT_W=weight_eviction(m_blocks) if prefetch else "", TOKENS_FIRST=first,
                      num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **pdl)
        self.main = KernelCall(launch.make_plan(kernels.small_m_gemm_kernel, grid, kwargs, "small_m"), index)
        self.splits = splits
        self.own_scales = x_quant is not None and p.per_token
        self.acc_dtype = torch.int32 if int8 else torch.float32
        self.part_shape = (splits, p.m, p.n)
        self.part_strides = dl.contiguous_strides(self.part_shape)
        self.tiles = grid[0] * grid[1]  # the fused kernel's counters: one per output tile
        self.reduce = self.fused = None
        if splits > 1:
            fused = launch.make_plan(kernels.small_m_gemm_kernel, grid, dict(kwargs, LAST_REDUCES=True), "small_m")
            self.fused = KernelCall(fused, index)
            self.reduce = _epilogue_call(p, splits)


def _epilogue_call(p: GemmProblem, splits: int) -> KernelCall:
    """The kernel that sums ``splits`` fp32 / int32 partials ``[splits, M, N]`` in order from zero and applies
    the scales, the cast and the bias: the split-K reduction, and over one split the epilogue of
    ``torch._scaled_mm``'s fp32 product (``gemm.dequant_epilogue``'s order: its bits, but for a -0.0 product,
    which the sum from +0 makes +0.0). One call per problem and split count: a ``KernelCall`` serves one set
    of scalars (Triton compiles a 1 into the kernel)."""
    key = ("epilogue", p, splits)
    call = _GEMM_LAUNCHES.get(key)
    if call is not None:
        return call
    from fused_quant.kernels.triton import small_m_gemm as kernels

    generation, index = runtime.generation(), launch.device_index(p.device)
    bn, bm, warps = EPILOGUE_TILE
    kwargs = dict(_scale_flags(p), INT8=p.kind == "int8", BLOCK_N=bn, BLOCK_M=bm, num_warps=warps,
                  **launch.pdl_options(index, launch_first=True))
    grid = (-(-p.n // bn) * -(-p.m // bm),)
    call = KernelCall(launch.make_plan(kernels.split_k_epilogue_kernel, grid, kwargs, "epilogue"), index)
    return _GEMM_LAUNCHES.put(key, call, generation)


def _small_m_call(p: GemmProblem, config: tuple | None = None, x_quant: tuple | None = None,
                  y_quant: tuple | None = None) -> SmallMCall:
    key = ("small_m", p, config, x_quant, y_quant)
    call = _GEMM_LAUNCHES.get(key)
    if call is None:
        generation = runtime.generation()
        if config is None:
            # the predicate decided; here only the row's config (no peers: no second comparison)
            cfg, why = _row_config(p)
            if cfg is None:
                raise ValueError(f"small-M GEMM has no config for M={p.m} N={p.n} K={p.k}: {why}")
        else:
            cfg = dict(config)
        call = _GEMM_LAUNCHES.put(key, SmallMCall(p, cfg, x_quant, y_quant), generation)
    return call


def _config_key(config: dict | None) -> tuple | None:
    """A config as ``_small_m_call`` keys its launches (None: the sweep's table)."""
    return tuple(sorted(config.items())) if config else None


def bind_small_m(p: GemmProblem, w, ws, bias, config: dict | None = None):
    """The small-M GEMM for a layer's weight (``config`` overrides the sweep's table: sweeps, tests)."""
    return _small_m_caller(p, _small_m_call(p, _config_key(config)), w, ws, bias)


def _no_stream(index: int) -> None:
    return None


# The split-K partials of eager one-launch calls: one flat workspace per (device, stream, accumulator dtype),
# shared by every bound caller and grown to the largest call seen. Calls on one stream run one after the
# other, and a kernel that starts early under PDL writes nothing before its grid dependency wait, so no two
# calls use it at once; a call on another stream has its own. Only a caller's second and later calls on a
# stream take it: the checked entry (the custom op's implementation) binds a caller for one call, and under
# torch.compile(mode="reduce-overhead") that call runs with the CUDA-graph trees' pool allocating, which refuses
# a tensor kept past the call (H200, benchmarks/RESULTS.md, twenty-fourth round, run 3). Saves each later eager
# split-K call an allocation (3.1-5.2 us of host time per down call, twenty-fifth round). Emptied by
# ``fused_quant.reset()``.
_PARTIALS = runtime.Cache("split_k_partials", 64)


def split_k_partials(index: int, stream: object, dtype: torch.dtype, numel: int, device: torch.device) -> torch.Tensor:
    """The partials workspace of ``stream`` on device ``index``: a flat ``dtype`` tensor of at least ``numel``
    elements (allocated on that stream, which is current)."""
    key = (index, stream, dtype)
    buf = _PARTIALS.get(key)
    if buf is None or buf.numel() < numel:
        generation = runtime.generation()
        buf = _PARTIALS.put(key, torch.empty(numel, dtype=dtype, device=device), generation)
    return buf


def _small_m_caller(p: GemmProblem, c: SmallMCall, w, ws, bias, bound: bool = True):
    """``call(x, xs)`` running ``c`` for a layer's weight. With split-K, an eager call of a ``bound`` caller
    (one called again and again) launches the fused kernel (one launch: the host's time counts); a call
    under CUDA graph capture (the least GPU time, benchmarks/RESULTS.md, fourteenth round) and every call
    of a one-call caller (its counters would need zeroing each time) the main kernel and the epilogue
    kernel. The same bits."""
    ws, bias_arg = _fixed_operands(ws, bias)
    shape, strides, device, out_dtype = (p.m, p.n), (p.n, 1), w.device, p.out_dtype
    scalars, reduce_scalars = gemm_scalars(p, w), (p.m, p.n, c.splits, p.n)
    own_scales, scales_shape = c.own_scales, (p.m,)
    part_numel = math.prod(c.part_shape)
    # the fused kernel's tile counters, this caller's own per stream (two streams may run it at once): zeroed
    # at its first eager call on the stream, set back to 0 by each tile's last split
    locks, index = {}, launch.device_index(device)
    stream_of = dl.raw_stream if index >= 0 else _no_stream  # the interpreter's calls run on no stream

    def call(x, xs):
        two_kernels = c.reduce is not None and (not bound or capturing())
        if own_scales:  # xs is None: the main kernel stores its token scales for the epilogue kernel
            xs = torch.empty_strided(scales_shape, (1,), dtype=torch.float32, device=device) if two_kernels else ws
        elif not xs.is_contiguous():
            xs = xs.contiguous()  # the kernels read xs[m] at xs_ptr + m
        out = torch.empty_strided(shape, strides, dtype=out_dtype, device=device)
        xp, wp, xsp, wsp, bp, op = x.data_ptr(), w.data_ptr(), xs.data_ptr(), ws.data_ptr(), bias_arg.data_ptr(), \
            out.data_ptr()
        aligned = not (xp | wp | xsp | wsp | bp | op) & 15
        if c.reduce is None:
            c.main((x, w, xs, ws, bias_arg, out, out, ws, ws), scalars,
                   (xp, wp, xsp, wsp, bp, op, op, wsp, wsp) if aligned else None)
            return out
        if two_kernels:
            part = torch.empty_strided(c.part_shape, c.part_strides, dtype=c.acc_dtype, device=device)
            pp = part.data_ptr()
            aligned = aligned and not pp & 15
            c.main((x, w, xs, ws, bias_arg, out, part, ws, ws), scalars,
                   (xp, wp, xsp, wsp, bp, op, pp, wsp, wsp) if aligned else None)
            c.reduce((part, xs, ws, bias_arg, out), reduce_scalars, (pp, xsp, wsp, bp, op) if aligned else None)
            return out
        stream = stream_of(index)
        counters = locks.get(stream)
        if counters is None:  # this caller's first call on the stream: its own partials, as a one-call caller's
            counters = locks[stream] = torch.zeros(c.tiles, dtype=torch.int32, device=device)
            part = torch.empty(part_numel, dtype=c.acc_dtype, device=device)
        else:
            part = split_k_partials(index, stream, c.acc_dtype, part_numel, device)
        pp = part.data_ptr()
        aligned = aligned and not pp & 15
        cp = counters.data_ptr()
        c.fused((x, w, xs, ws, bias_arg, out, part, counters, ws), scalars,
                (xp, wp, xsp, wsp, bp, op, pp, cp, wsp) if aligned and not cp & 15 else None)
        return out

    def fits(x_dtype: torch.dtype) -> bool:
        """Whether the kernel an eager call of ``x_dtype`` rows launches fits a block's shared memory
        (``KernelCall.fits``; its operands' dtypes as ``call`` passes them, a static scale's fp32)."""
        head = (x_dtype, w.dtype, ws.dtype if own_scales else torch.float32, ws.dtype, bias_arg.dtype, out_dtype)
        if c.reduce is None:
            return c.main.fits((*head, out_dtype, ws.dtype, ws.dtype), scalars)
        return c.fused.fits((*head, c.acc_dtype, torch.int32, ws.dtype), scalars)

    call.fits = fits
    return call


# The widest token block whose float tile the small-M GEMM quantizes per K step at a gain (H200,
# benchmarks/RESULTS.md, eleventh round): a first version took 0.3-2.2 us more GPU time per MLP with
# 16-token blocks, 27 us more with 64-token blocks; the quantizing call costs the host what a one-kernel
# call costs, where the producer added 7.6-16.1 us
QUANTIZING_MAX_BLOCK_M = 16


def quantizes_float_tiles(cfg: dict, kind: str) -> bool:
    """Whether the small-M kernel can quantize a float activation in ``cfg``'s token blocks with the bits of the
    producer and then the plain kernel: blocks of at most ``QUANTIZING_MAX_BLOCK_M`` tokens, and a one-token block
    (no MMA) for int8 only. A one-token block adds its K lanes in an order the compiler's register layout decides,
    and a float tile's load can change that layout: int8's integer sums are exact in any order, FP8's fp32 sums
    are not (on the H200 an FP8 block of one weight row with fp16 input gave other bits than the plain kernel,
    benchmarks/RESULTS.md, twenty-eighth round, run 8). An MMA adds in its own fixed order."""
    return cfg["BLOCK_M"] <= QUANTIZING_MAX_BLOCK_M and (cfg["BLOCK_M"] > 1 or kind == "int8")


def quantizes_float_input(cfg: dict, m: int, kind: str) -> bool:
    """Whether a table row's ``cfg`` at M tokens takes a float activation and quantizes it in the kernel: one token
    block (``quantizes_float_tiles``), what was measured. A row of several token blocks (16-token blocks at 17-32
    tokens) was never measured quantizing, so it leaves a float input to the producer."""
    return m <= cfg["BLOCK_M"] and quantizes_float_tiles(cfg, kind)


# Token counts up to which a per-tensor key's quantizing call runs under CUDA graph capture too, with a
# config of one split (what was measured: Llama-3-8B's gate_up): it takes the identity producer's launch
# off the replay's critical path (H200, benchmarks/RESULTS.md, sixteenth round: MLP replay 0.3-1.5 us less
# for FP8 static and 0.2-0.9 us for int8 static at M = 1-4; at M = 8 int8 static 11 us more, at 16 no
# gain). Split-K configs were not measured so; a per-token key's row sweep costs more GPU time than its
# producer (5-17 us more per MLP at M = 1-16): both keep the producer under capture.
QUANTIZING_CAPTURED_MAX_M = 4


def bind_small_m_quantizing(p: GemmProblem, w, ws, bias, x_quant: tuple, config: dict):
    """The small-M GEMM for a layer's weight taking the activation as contiguous float rows ``x [M, K]``
    (``x_quant`` = (key name, x dtype)), quantized in the kernel as the identity producer of that key
    would: ``call(x, scale)``, with a per-tensor key's scale or None for a per-token key, gives the bits
    of ``bind_small_m``'s call on the producer's output, with one launch and one allocation fewer. Only
    for a ``config`` whose token blocks ``quantizes_float_tiles`` takes (a ValueError for others).

    The bits are the producer's for every static scale the package takes (finite, >= FLT_MIN: ``validation``
    refuses the others at every way in). Below that an FP8 scale's inverse overflows and, where K is not a
    multiple of BLOCK_K, the zeros the kernel reads past K quantize to NaN, which reaches every output."""
    if not quantizes_float_tiles(config, p.kind):
        what = (f"float tiles of at most {QUANTIZING_MAX_BLOCK_M} tokens" if config["BLOCK_M"] > QUANTIZING_MAX_BLOCK_M
                else f"{p.kind} float tiles in MMA token blocks only (a one-token block's fp32 sums may be added in "
                     "another order)")
        raise ValueError(f"the small-M GEMM quantizes {what}, the config has BLOCK_M={config['BLOCK_M']}")
    key = K.key_from_name(x_quant[0])
    if K.is_per_token(key) != p.per_token or K.is_fp8(key) != (p.kind == "fp8"):
        raise ValueError(f"the small-M GEMM quantizes for a {p.kind} problem with "
                         f"{'per-token' if p.per_token else 'per-tensor'} activation scales, got key {x_quant[0]}")
    return _small_m_caller(p, _small_m_call(p, _config_key(config), x_quant), w, ws, bias)


# The token buckets where the small-M GEMM applies the next layer's silu_and_mul producer in its epilogue
# (``bind_small_m_producing``): where Llama-3-8B's MLP measured it faster (H200, benchmarks/RESULTS.md, twenty-first
# round: up to 1.2 us less GPU time per graph-replayed MLP at M = 1-16, 0.2 more once for int8 at 16, 1.9-2.5 less
# at 64, 3.4 for int8 at 128; twenty-second round, int8 static, two runs: 2.2-2.3 less at 160, 4.1-4.8 less at 256).
# Left out: 32, 4.1-5.1 us more with programmatic dependent launch on (1.9 less with it off; both GEMMs took longer
# in a profile, the cause is not established), and 192, 1.9-2.2 us more (int8 static; FP8's gate_up is not the
# small-M GEMM from 65 tokens on).
PRODUCING_BUCKETS = (1, 2, 4, 8, 16, 64, 128, 160, 256)


def quantizing_under_capture(p: GemmProblem, cfg: dict) -> bool:
    """Whether a small-M call quantizing its float input runs under CUDA graph capture too (the gemm module's
    ``under_capture``): a per-tensor key with at most ``QUANTIZING_CAPTURED_MAX_M`` tokens and a config of one
    split, what was measured."""
    return not p.per_token and p.m <= QUANTIZING_CAPTURED_MAX_M and cfg["splits"] == 1


def bind_small_m_from_producer(p: GemmProblem, w, ws, bias, quantizer: object):
    """The small-M providers' ``bind_quantizing``: ``bind_small_m_quantizing`` where ``quantizer_of``
    says the kernel can stand in for the producer launch and the problem's config quantizes a float input
    (``quantizes_float_input``); else None. The call's ``under_capture``: ``quantizing_under_capture``."""
    x_quant = quantizer_of(quantizer, p)
    if x_quant is None:
        return None
    arch = _device_arch(p.device)
    cfg, _ = _row_config(p)  # the row's, as bound
    if cfg is None or not quantizes_float_input(cfg, p.m, p.kind):
        return None
    wide = quantizing_config(p, cfg, arch)
    for config in (wide, cfg) if wide is not cfg else (cfg,):
        call = bind_small_m_quantizing(p, w, ws, bias, x_quant, config)
        # the sweep compiled its rows for quantized tiles: a float tile takes 2-4 times their bytes per pipeline
        # stage (on an H100 Llama-3-8B o's 2-token row, a small model's nearest, quantizing fp32 rows at one token
        # took 237568 bytes of 232448)
        if call.fits(x_quant[1]):
            call.under_capture = quantizing_under_capture(p, config)
            return call
    return None


def quantizing_config(p: GemmProblem, cfg: dict, arch: str | None) -> dict:
    """The config of ``bind_small_m_from_producer``'s call for the table's row ``cfg`` (one that quantizes a float
    input): the row's own, except for an int8 per-token key, whose integer sums give every config the row's bits.
    Each program of such a call sweeps its tokens' rows for their absmax before its weight streams, time the sweep's
    table never saw. It takes the config ``benchmarks/quantizing_calls.py`` measured fastest for the nearest shape at
    the problem's M bucket (``SMALL_M_QUANTIZING_FILE``; on an H100 int8 down at one token 23.9 us in a one-token row
    of 8 weight rows a program against 39.1 in the previous pick, benchmarks/RESULTS.md, thirty-fourth round); where
    that table has no row, a one-token row gives way to the table's row at 2 tokens where that row quantizes ``p.m``
    tokens in one MMA block (far fewer programs sweep: 9.5 us less GPU time per int8 per-token MLP at one token than
    the one-token row of 1-2 weight rows, H100, thirty-first round)."""
    if not (p.per_token and p.kind == "int8"):
        return cfg
    model = _device_model(p.device)
    row, _ = _swept_row(arch, p.kind, p.n, p.k, p.m, SMALL_M_QUANTIZING_FILE, model)
    if row is not None:
        measured = {f: row[f] for f in CONFIG_FIELDS}
        if quantizes_float_input(measured, p.m, p.kind):
            return cfg if measured == cfg else measured  # the row itself where they agree: one bind to try
    if cfg["BLOCK_M"] != 1:
        return cfg
    wide, _ = small_m_config(arch, p.kind, p.n, p.k, 2, (), model)
    return wide if wide is not None and wide["BLOCK_M"] > 1 and quantizes_float_input(wide, p.m, p.kind) else cfg


def quantizer_of(bound: object, p: GemmProblem) -> tuple | None:
    """``bind_small_m_quantizing``'s ``x_quant`` for a producer's bound launch when the small-M GEMM can
    stand in for it: the package's Triton identity producer (its heuristics' launch, not a tuning one)
    of the problem's activation dtype and scales (per tensor or per token), on contiguous rows of K on
    the problem's device. Else None."""
    if type(bound) is not launch.BoundLaunch:
        return None
    act, key_name, x_dtype, _, _, config, row_stride, (m, d_in) = bound.args
    if (act != "identity" or config is not None or row_stride != d_in or (m, d_in) != (p.m, p.k)
            or bound.q_dtype != p.x_dtype or bound.device != p.device
            or (bound.s_shape is not None) != p.per_token):
        return None
    return key_name, x_dtype


def producing_of(bound: object, p: GemmProblem) -> tuple | None:
    """``bind_small_m_producing``'s ``y_quant`` for a producer's bound launch when the small-M GEMM can apply it
    to its output: the package's Triton silu_and_mul producer of a per-tensor key (its heuristics' launch, not a
    tuning one) reading the problem's whole output (contiguous rows of an even N, its dtype, its device): the
    constexprs of that launch's plan, which the GEMM's epilogue takes for its own. Else None."""
    if type(bound) is not launch.BoundLaunch:
        return None
    act, _, x_dtype, _, _, config, row_stride, (m, d_in) = bound.args
    if (act != "silu_and_mul" or config is not None or bound.s_shape is not None or row_stride != d_in
            or (m, d_in) != (p.m, p.n) or p.n % 2 or x_dtype != p.out_dtype or bound.device != p.device):
        return None
    plan = bound.resolved.plan
    if plan is None:
        return None
    return tuple((theirs, plan.kwargs[theirs]) for _, theirs in _ACT_Q_FROM)


def bind_small_m_producing(p: GemmProblem, w, ws, bias, producer: object, quantizer: object = None,
                           config: dict | None = None):
    """The small-M providers' ``bind_producing``: the GEMM for a layer's weight whose epilogue applies the bound
    silu_and_mul producer launch ``producer`` of a per-tensor key to the output (``producing_of``) and stores its
    ``q [M, N/2]``: ``call(x, xs, scale)`` with the producer's static ``scale`` gives the bits of
    ``producer(bind_small_m's call(x, xs), scale)`` in one launch, without the output's store and the producer's
    loads. With ``quantizer`` (the identity producer launch that made ``x`` from floats) it takes the float
    activation, quantized in the kernel as ``bind_small_m_from_producer``'s call does (its ``under_capture``
    likewise). None where the problem's config (the table's row, as bound; ``config`` overrides it: tests) has
    more than one K split or blocks of one weight row, M's bucket is not one of ``PRODUCING_BUCKETS``, or the
    producers do not qualify."""
    y_quant = producing_of(producer, p)
    if y_quant is None or (config is None and m_bucket(p.m) not in PRODUCING_BUCKETS):
        return None
    cfg = config or _row_config(p)[0]
    if cfg is None or one_split(cfg, p.k) > 1 or cfg["BLOCK_N"] < 2:  # a block of one weight row: no gate | up pair
        return None
    x_quant = None
    if quantizer is not None:
        x_quant = quantizer_of(quantizer, p)
        # a test's config may hold several 16-token blocks (the kernel's bits); a table row quantizes as measured
        takes_float = quantizes_float_tiles(cfg, p.kind) if config else quantizes_float_input(cfg, p.m, p.kind)
        if x_quant is None or not takes_float:
            return None
    c = _small_m_call(p, _config_key(cfg), x_quant, y_quant)
    ws, bias_arg = _fixed_operands(ws, bias)
    h = p.n // 2
    shape, strides, device, q_dtype = (p.m, h), (h, 1), w.device, producer.q_dtype
    scalars = (*gemm_scalars(p, w)[:-1], h)  # q's row stride: N / 2
    own_scales = c.own_scales
    x_dtype = p.x_dtype if x_quant is None else x_quant[1]
    if not c.main.fits((x_dtype, w.dtype, ws.dtype if own_scales else torch.float32, ws.dtype, bias_arg.dtype, q_dtype,
                        q_dtype, ws.dtype, torch.float32), scalars):  # the sweep compiled the row without this epilogue
        return None

    def call(x, xs, scale):
        if own_scales:  # a per-token key's float x: the kernel works out the scales (one split: none stored)
            xs = ws
        elif not xs.is_contiguous():
            xs = xs.contiguous()  # the kernel reads xs[m] at xs_ptr + m
        q = torch.empty_strided(shape, strides, dtype=q_dtype, device=device)
        xp, wp, xsp, wsp, bp, qp, sp = (x.data_ptr(), w.data_ptr(), xs.data_ptr(), ws.data_ptr(), bias_arg.data_ptr(),
                                        q.data_ptr(), scale.data_ptr())
        aligned = not (xp | wp | xsp | wsp | bp | qp | sp) & 15
        c.main((x, w, xs, ws, bias_arg, q, q, ws, scale), scalars,
               (xp, wp, xsp, wsp, bp, qp, qp, wsp, sp) if aligned else None)
        return q

    # a float input under capture as bind_small_m_from_producer's call (so the same producers run and are counted)
    call.under_capture = x_quant is None or quantizing_under_capture(p, cfg)
    return call


def small_m_gemm(xq, xs, w, ws, bias, out_dtype, config: dict | None = None):
    """Provider call of the small-M GEMM (``xq [M, K]``, ``xs [M, 1] | [1, 1]``, ``w [N, K]``, ``ws [N, 1] | [1, 1]``)."""
    p = _problem_of(xq, xs, w, ws, bias, out_dtype)
    return _small_m_caller(p, _small_m_call(p, _config_key(config)), w, ws, bias, bound=False)(xq, xs)
