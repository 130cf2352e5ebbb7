"""The host side of the Triton launches (no kernel runs here): plans and the direct launch.

After the first JIT launch of a specialization the launcher calls the compiled kernel itself
(``launch._launch``); these tests pin what that relies on: the argument order of the kernels, a
specialization key at least as fine as Triton's, and that a new specialization goes back through
Triton's JIT. The GPU rows run every producer test through the direct launch.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

triton = pytest.importorskip("triton")

from fused_quant import keys as K  # noqa: E402
from fused_quant import runtime  # noqa: E402
from fused_quant.kernels import direct_launch as dl  # noqa: E402
from fused_quant.kernels import launch  # noqa: E402

KERNELS = ("act_quant_static_kernel", "act_quant_static_flat_kernel", "act_quant_token_kernel",
           "act_quant_token_chunks_kernel", "act_quant_token_2pass_kernel", "act_quant_token_persistent_kernel")


@pytest.mark.parametrize("name", KERNELS)
def test_runtime_arguments_precede_compile_time_ones(name):
    """The direct launch passes the runtime arguments, then the plan's constexprs in signature order."""
    from fused_quant.kernels.triton import act_quant

    kernel = getattr(act_quant, name)
    if not hasattr(kernel, "params"):
        pytest.skip("TRITON_INTERPRET=1: kernels are interpreted functions without JIT parameters")
    flags = [p.is_constexpr for p in kernel.params]
    first = flags.index(True)
    assert all(flags[first:]), f"{name}: a runtime argument follows a constexpr: {kernel.arg_names}"


def _backend(name):
    if name == "hip":
        from triton.backends.amd.compiler import HIPBackend

        return HIPBackend
    from triton.backends.nvidia.compiler import CUDABackend

    return CUDABackend


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_arg_spec_is_at_least_as_fine_as_tritons(backend, monkeypatch):
    """Two arguments with the same ``_arg_spec`` get the same Triton specialization from that
    backend, so a kernel compiled for one is valid for the other: integers at the edges, tensors of
    several dtypes at every alignment, (ROCm buffer ops) storages on both sides of 2 GiB, and tensor
    descriptors of several blocks, shapes and bases (a descriptor takes a 16-byte aligned one only)."""
    from triton._C.libtriton import native_specialize_impl

    monkeypatch.setattr(dl, "_HIP", backend == "hip")
    cls = _backend(backend)
    ints = [0, 1, 2, 3, 15, 16, 17, 31, 32, 48, 4096, 14336, 14337, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16,
            2**40, -1, -16, -(2**31), -(2**31) - 16]
    base = torch.zeros(64, dtype=torch.bfloat16)
    tensors = ([base[i:] for i in range(16)] + [torch.zeros(8, dtype=torch.uint8)[i:] for i in range(8)]
               + [torch.zeros(4, dtype=torch.float32), torch.zeros(4, dtype=torch.float8_e4m3fn)]
               + [torch.empty(2**31 + 64, dtype=torch.uint8, device="meta")[i:] for i in (0, 16, 3)])
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows = torch.zeros(4096, dtype=torch.int8)
    descriptors = [TensorDescriptor(rows[offset:offset + m * k].view(m, k), [m, k], [k, 1], block)
                   for offset in (0, 16, 32) for m, k in ((16, 64), (3, 32), (1, 16), (24, 48))
                   for block in ([16, 16], [32, 16], [16, 32])]
    by_spec: dict = {}
    for v in ints + tensors + descriptors:
        by_spec.setdefault(dl.arg_spec(v), set()).add(native_specialize_impl(cls, v, False, True, True))
    coarse = {k: v for k, v in by_spec.items() if len(v) > 1}
    assert not coarse, f"_arg_spec merges arguments Triton ({backend}) tells apart: {coarse}"


def test_kernel_ids_are_unique_per_compile_time_arguments():
    """Different compile-time arguments never share a compiled-kernel key, the same ones always do."""
    a = launch._plan("relu2", "fp8_static_tensor", torch.bfloat16, True, torch.float8_e4m3fn, 16, 1024, False, -1, None)
    b = launch._plan("relu2", "int8_static_tensor", torch.bfloat16, True, torch.float8_e4m3fn, 16, 1024, False, -1, None)
    launch.reset_plans()
    a2 = launch._plan("relu2", "fp8_static_tensor", torch.bfloat16, True, torch.float8_e4m3fn, 16, 1024, False, -1, None)
    assert a2 is not a and a2.kernel_id == a.kernel_id and a.kernel_id != b.kernel_id
    assert hash(a2.kernel_id) == hash(a.kernel_id)


def test_chunk_config_must_cover_the_row():
    with pytest.raises(ValueError, match="does not cover a row of 1000"):
        launch._plan("relu2", "int8_dynamic_token", torch.bfloat16, True, torch.float8_e4m3fn, 4, 1000, True, -1,
                     (("variant", "chunks"), ("CHUNK", 256), ("NCHUNK", 3), ("num_warps", 4)))


class _Compiled:
    """Stands in for triton's CompiledKernel: ``compiled[grid](*args)`` records the call."""

    function = packed_metadata = run = None

    def __init__(self, calls):
        self.calls = calls

    def __getitem__(self, grid):
        return lambda *args: self.calls.append(("direct", grid, args))


class _Kernel:
    def __init__(self, compiled_type=_Compiled):
        self.calls = []
        self.compiled_type = compiled_type

    def __getitem__(self, grid):
        def jit(*args, **kwargs):
            self.calls.append(("jit", grid, args, kwargs))
            return self.compiled_type(self.calls) if self.compiled_type else None
        return jit


def _plan(kernel, kernel_id):
    return launch._Plan(kernel, (3, 1, 1), {"A": 1, "B": 2, "num_warps": 4}, (1, 2), "static", None, kernel_id)


def test_direct_launch_after_first_jit_launch_per_specialization(monkeypatch):
    monkeypatch.setattr(launch, "_COMPILED", runtime.Cache("compiled"))
    kernel = _Kernel()
    plan = _plan(kernel, object())
    x = torch.zeros(64, dtype=torch.bfloat16)
    q = torch.zeros(64, dtype=torch.uint8)
    launch._launch(plan, (x, q, 7, 32))
    launch._launch(plan, (x, q, 9, 48))  # same specialization: direct
    launch._launch(plan, (x[1:], q, 9, 48))  # x no longer 16-byte aligned: Triton's JIT again
    launch._launch(plan, (x, q, 1, 48))  # 1 is a constexpr for Triton: JIT again
    launch._launch(plan, (x, q, 5, 2**31))  # 64-bit integer: JIT again
    launch._launch(plan, (x, q, 5, 2**32))  # same as the previous one: direct
    launch._launch(plan, (x.view(torch.float16), q, 9, 48))  # another dtype: JIT again
    kinds = [c[0] for c in kernel.calls]
    assert kinds == ["jit", "direct", "jit", "jit", "jit", "direct", "jit"], kinds
    assert kernel.calls[0][3] == plan.kwargs and kernel.calls[0][1] == (3, 1, 1)
    assert kernel.calls[1][2] == (x, q, 9, 48, 1, 2), "runtime arguments, then the constexprs in order"


def test_no_direct_launch_without_a_compiled_kernel(monkeypatch):
    """The Triton interpreter's launch returns no compiled kernel: every launch goes through it."""
    monkeypatch.setattr(launch, "_COMPILED", runtime.Cache("compiled"))
    kernel = _Kernel(compiled_type=None)
    plan = _plan(kernel, object())
    x = torch.zeros(64, dtype=torch.bfloat16)
    for _ in range(3):
        launch._launch(plan, (x, 7))
    assert [c[0] for c in kernel.calls] == ["jit"] * 3


@pytest.mark.parametrize("act,key_name,m,d,flat_ok", [
    ("relu2", "fp8_static_tensor", 8192, 14336, True), ("relu2", "fp8_static_tensor", 16, 14336, False),
    ("silu_and_mul", "int8_dynamic_token", 8192, 14336, False), ("relu2", "int8_dynamic_token", 7, 1024, True),
])
def test_plan_consts_follow_the_signature(act, key_name, m, d, flat_ok):
    plan = launch._plan(act, key_name, torch.bfloat16, True, torch.float8_e4m3fn, m, d, flat_ok, -1, None)
    names = plan.kernel.arg_names
    consts = [n for n in names if n in plan.kwargs]
    assert plan.consts == tuple(plan.kwargs[n] for n in consts)
    assert names[len(names) - len(consts):] == consts, "constexprs are the signature's tail"
    assert len(plan.grid) == 3 and all(g >= 1 for g in plan.grid)
    assert plan.kwargs["SATFINITE"] is False, "CPU tensors (the interpreter) take the explicit clamp + NaN select"


def test_token_heuristics():
    """Per-token launch choice: one block up to one_pass_max_n, rows in chunks up to chunked_max_n
    (relu2 and the cheap bf16 / fp16 silu at every M, the exact silu_and_mul up to its last max M), the
    persistent kernel beyond."""
    from fused_quant.kernels import heuristics

    cfg = heuristics.config_for("sm_90")
    assert heuristics.token_launch(8192, 4096, "sm_90", "silu_and_mul")["variant"] == "rows"
    assert heuristics.token_launch(8192, 14336, "sm_90", "relu2") == {
        "variant": "chunks", "CHUNK": 2048, "NCHUNK": 7, "num_warps": cfg.chunked_warps_cheap}
    for m in (1, 223, 257, 512, 8192, 32768):  # the cheap bf16 / fp16 silu: chunked like relu2
        assert heuristics.token_launch(m, 14336, "sm_90", "silu_and_mul", fast_silu=True) == {
            "variant": "chunks", "CHUNK": 2048, "NCHUNK": 7, "num_warps": cfg.chunked_warps_cheap}
    # but for rows of 14336 (the width measured) at M = 224-256 one block per row, captured or not (the chunks
    # elsewhere, and for other acts, other widths, the exact silu, other archs)
    for m in (224, 256):
        for captured in (False, True):
            assert heuristics.token_launch(m, 14336, "sm_90", "silu_and_mul", fast_silu=True, captured=captured) == {
                "variant": "rows", "ROWS": 1, "BLOCK_N": 16384, "num_warps": 32}
        assert heuristics.token_launch(m, 14336, "sm_90", "relu2")["variant"] == "chunks"
        for d in (8192, 11008, 14335, 14337, 16384):
            assert heuristics.token_launch(m, d, "sm_90", "silu_and_mul", fast_silu=True)["variant"] == "chunks", d
        assert heuristics.token_launch(m, 14336, "sm_90", "silu_and_mul")["variant"] == "chunks"
        assert heuristics.token_launch(m, 14336, None, "silu_and_mul", fast_silu=True)["variant"] == "chunks"
    last_m, _ = cfg.chunked_silu[-1]
    for m, warps in cfg.chunked_silu:
        assert heuristics.token_launch(m, 14336, "sm_90", "silu_and_mul") == {
            "variant": "chunks", "CHUNK": 2048, "NCHUNK": 7, "num_warps": warps}
    assert heuristics.token_launch(last_m + 1, 14336, "sm_90", "silu_and_mul")["variant"] == "persistent"
    assert heuristics.token_launch(1, cfg.chunked_max_n + 1, "sm_90", "relu2")["variant"] == "persistent"
    assert heuristics.chunking(5120, (2048, 1024, 512)) == (1024, 5), "least padding"
    assert heuristics.chunking(6144, (2048, 1024, 512)) == (2048, 3), "widest on ties"
    assert heuristics.chunking(5000, (2048, 1024, 512)) == (1024, 5)


@pytest.mark.parametrize("arch", [None, "sm_90"])
def test_static_heuristics_at_each_rows_bounds(arch):
    """Each tile row of the static kernels takes M up to its max M and hands M + 1 to the next; relu2 / identity go
    flat from ``static_flat``'s min M (not one below it), silu_and_mul never."""
    from fused_quant.kernels import heuristics

    cfg = heuristics.config_for(arch)
    min_m = cfg.static_flat[0]
    for act, rows in (("silu_and_mul", cfg.static_rows_silu), ("relu2", cfg.static_rows)):
        for (max_m, block_m, block_n, warps), after in zip(rows, [*rows[1:], None]):
            if act == "relu2" and max_m >= min_m:
                break  # flat from there on
            assert heuristics.static_launch(max_m, 4096, arch, act) == {
                "BLOCK_M": block_m, "BLOCK_N": min(block_n, 4096), "num_warps": warps}, (act, max_m)
            if after is not None and (act != "relu2" or max_m + 1 < min_m):
                assert heuristics.static_launch(max_m + 1, 4096, arch, act)["BLOCK_M"] == after[1], (act, max_m)
    for act in ("relu2", "identity"):
        assert "flat" not in heuristics.static_launch(min_m - 1, 4096, arch, act)
        assert heuristics.static_launch(min_m, 4096, arch, act)["flat"] == 1
    assert "flat" not in heuristics.static_launch(1 << 20, 4096, arch, "silu_and_mul")


def test_int8_gemm_tile_rows_at_each_bound():
    """The Triton int8 GEMM's tile row of M (``int8_gemm_row``, on CPU tensors: the interpreter's table): a row
    takes M up to its max M, M + 1 goes to the next row; every table's last row (the GPU models' own included)
    covers any M."""
    from fused_quant.gemm import GemmProblem
    from fused_quant.kernels import gemm_launch as g

    assert all(rows[-1][0] >= 1 << 62 for rows in (g.INT8_GEMM_CONFIGS, *g.INT8_GEMM_DEVICE_CONFIGS.values()))

    def row_of(m):
        return g.int8_gemm_row(GemmProblem(m, 64, 64, "int8", torch.int8, torch.bfloat16, torch.device("cpu"),
                                           True, True, False))

    rows = g.INT8_GEMM_CONFIGS
    for (max_m, *tile), (_, *next_tile) in zip(rows, rows[1:]):
        assert list(row_of(max_m)) == tile and list(row_of(max_m + 1)) == next_tile, max_m
    assert list(row_of(1 << 40)) == list(rows[-1][1:])


@pytest.mark.parametrize("m", [0, 224, 256])
def test_wide_silu_rows_off_value_matches_no_m(monkeypatch, m):
    """``silu_token_wide_rows`` of zeros, the default's: the chunks at every M, M = 0 included."""
    from fused_quant.kernels import heuristics

    off = dataclasses.replace(heuristics.config_for("sm_90"), silu_token_wide_rows=(0, 0, 0, 0, 0))
    monkeypatch.setitem(heuristics.CONFIGS, "sm_90", off)
    assert heuristics.token_launch(m, 14336, "sm_90", "silu_and_mul", fast_silu=True)["variant"] == "chunks"
    monkeypatch.setitem(heuristics.CONFIGS, "sm_90", dataclasses.replace(off, silu_token_wide_rows=(0, 0, 0, 20000, 32)))
    assert heuristics.token_launch(m, 14336, "sm_90", "silu_and_mul", fast_silu=True)["variant"] == "chunks"


@pytest.mark.parametrize("key_name,fp8_dtype,device,nvidia,config,expected", [
    ("fp8_static_tensor", torch.float8_e4m3fn, 0, True, None, True),
    ("fp8_dynamic_token", torch.float8_e4m3fn, 0, True, None, True),
    ("int8_dynamic_token", torch.float8_e4m3fn, 0, True, None, False),  # no FP8 conversion to speak of
    ("fp8_static_tensor", torch.float8_e4m3fnuz, 0, True, None, False),  # M8 = 224: explicit clamp
    ("fp8_static_tensor", torch.float8_e4m3fn, 0, False, None, False),  # ROCm build: not measured there
    ("fp8_static_tensor", torch.float8_e4m3fn, -1, True, None, False),  # interpreter (CPU tensors)
    ("fp8_static_tensor", torch.float8_e4m3fn, -1, True, (("satfinite", 1),), True),  # tuning override
    ("int8_static_tensor", torch.float8_e4m3fn, -1, True, (("satfinite", 1),), False),
])
def test_satfinite_only_where_the_conversion_was_measured(monkeypatch, key_name, fp8_dtype, device, nvidia, config,
                                                          expected):
    """SATFINITE (conversion without explicit clamp and NaN select) is chosen for e4m3fn FP8 keys on
    NVIDIA devices only, or when a tuning config asks for it on an FP8 key."""
    monkeypatch.setattr(launch, "_NVIDIA_TORCH", nvidia)
    monkeypatch.setattr(launch, "_interpreting", lambda: False)
    monkeypatch.setattr(launch, "_cuda_arch", lambda index: "sm_90")
    monkeypatch.setattr(launch, "_num_sms", lambda index: 2)
    plan = launch._plan("relu2", key_name, torch.bfloat16, True, fp8_dtype, 64, 1024, True, device, config)
    assert plan.kwargs["SATFINITE"] is expected


@pytest.mark.parametrize("act,x_dtype,device,nvidia,arch,config,expected", [
    ("silu_and_mul", torch.bfloat16, 0, True, "sm_90", None, True),
    ("silu_and_mul", torch.bfloat16, 0, True, "sm_100", None, False),  # approximations not measured there
    ("silu_and_mul", torch.float16, 0, True, "sm_90", None, True),  # fp16 too (two gates patched)
    ("silu_and_mul", torch.float32, 0, True, "sm_90", None, False),
    ("relu2", torch.bfloat16, 0, True, "sm_90", None, False),  # no silu to speak of
    ("silu_and_mul", torch.bfloat16, 0, False, "sm_90", None, False),  # ROCm build
    ("silu_and_mul", torch.bfloat16, -1, True, "sm_90", None, False),  # interpreter (CPU tensors): no inline PTX
    ("silu_and_mul", torch.bfloat16, 0, "interpreting", "sm_90", None, False),  # interpreter, CUDA tensors
    ("silu_and_mul", torch.bfloat16, 0, True, "sm_90", (("fast_silu", 0),), False),  # tuning override
    ("silu_and_mul", torch.bfloat16, 0, True, "sm_100", (("fast_silu", 1),), True),  # measuring a new arch
    ("silu_and_mul", torch.float32, 0, True, "sm_90", (("fast_silu", 1),), False),  # never fp32, whatever asked
    ("silu_and_mul", torch.bfloat16, 0, False, "sm_90", (("fast_silu", 1),), False),  # never off NVIDIA
    ("silu_and_mul", torch.bfloat16, -1, True, "sm_90", (("fast_silu", 1),), False),  # nor in the interpreter
])
def test_fast_silu_only_for_bf16_fp16_on_measured_nvidia_archs(monkeypatch, act, x_dtype, device, nvidia, arch, config,
                                                          expected):
    """FAST_SILU (ex2.approx + rcp.approx, measured to round like torch for every bf16 and fp16 gate
    on the H200) is chosen for bf16 / fp16 silu_and_mul on an NVIDIA device whose own arch's heuristics say so (or a
    tuning config asks, on NVIDIA); the per-token heuristics then chunk its rows at every M, like relu2's."""
    monkeypatch.setattr(launch, "_NVIDIA_TORCH", bool(nvidia))
    monkeypatch.setattr(launch, "_interpreting", lambda: nvidia == "interpreting")
    monkeypatch.setattr(launch, "_cuda_arch", lambda index: arch)
    monkeypatch.setattr(launch, "_num_sms", lambda index: 2)
    for key_name in ("fp8_static_tensor", "int8_dynamic_token"):
        plan = launch._plan(act, key_name, x_dtype, True, torch.float8_e4m3fn, 8192, 14336, False, device, config)
        assert plan.kwargs["FAST_SILU"] is expected
        assert "fast_silu" not in plan.kwargs, "the override is consumed, never passed to the kernel"
        if key_name == "int8_dynamic_token" and act == "silu_and_mul" and config is None:
            assert plan.variant == ("chunks" if expected else "persistent")


# --- bound launches: one input signature resolved once ------------------------------------------


class _Run:
    """Stands in for a compiled kernel's launcher: records what the direct launch passes."""

    function, packed_metadata = "function", "metadata"

    def __init__(self):
        self.calls = []

    def run(self, *args):
        self.calls.append(args)


@pytest.fixture
def direct(monkeypatch):
    """Kernels never run: ``_launch`` and the compiled kernels' launcher record their calls; the
    current device is the CPU tensors' index (-1) unless a test says otherwise."""
    generic = []
    monkeypatch.setattr(launch, "_COMPILED", runtime.Cache("compiled"))
    monkeypatch.setattr(launch, "_launch", lambda plan, args: generic.append((plan, args)))
    monkeypatch.setattr(dl, "_current_device", lambda: -1)
    monkeypatch.setattr(dl, "raw_stream", lambda index: ("stream", index))
    return generic


def _aligned(shape, dtype=torch.bfloat16, offset=0):
    """A tensor of ``shape`` whose data starts ``offset`` elements into a 16-byte aligned buffer."""
    n = 1
    for s in shape:
        n *= s
    return torch.zeros(n + 16, dtype=dtype)[offset:offset + n].view(shape)


def _bind(x, act="relu2", key_name="fp8_static_tensor"):
    return launch.bind_rows(x, launch.rows_view(x), act, key_name, True, torch.float8_e4m3fn)


@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_bound_launch_goes_direct_once_its_aligned_kernel_is_compiled(key_name, direct):
    x = _aligned((16, 1024))
    scale = torch.tensor([0.5]) if K.is_static(K.KEYS[key_name]) else None
    bound = _bind(x, key_name=key_name)
    assert _bind(x, key_name=key_name) is bound, "one bound launch per signature"
    q, s = bound(x, scale)
    assert len(direct) == 1 and direct[0][1][:3] == (x, q, s) and direct[0][1][3:] == bound.resolved.tail
    assert q.shape == (16, 1024) and q.dtype == K.storage_dtype(K.KEYS[key_name], torch.float8_e4m3fn)
    assert s is scale if scale is not None else s.shape == (16, 1) and s.dtype == torch.float32
    # the key _launch files a kernel under for these (aligned) operands is the bound launch's
    assert bound.resolved.spec == (bound.resolved.plan.kernel_id, -1, *[dl.arg_spec(a) for a in direct[0][1]])
    compiled = _file(bound.resolved.spec, _Run())
    x2 = _aligned((16, 1024))
    q2, s2 = bound(x2, scale)
    g = bound.resolved.plan.grid
    # the launcher is given the operands' addresses (it takes integers as they are)
    assert compiled.calls == [(g[0], g[1], g[2], ("stream", -1), "function", "metadata", None, None, None,
                               x2.data_ptr(), q2.data_ptr(), s2.data_ptr(), *bound.resolved.tail,
                               *bound.resolved.plan.consts)]
    assert len(direct) == 1


def test_bound_launch_falls_back_to_the_generic_launch(direct, monkeypatch):
    """Unaligned operands, a scale that is not float32, another current device and Triton launch
    hooks all take ``_launch`` (which specializes and honours them)."""
    x = _aligned((16, 1024))
    bound = _bind(x)
    compiled = _file(bound.resolved.spec, _Run())
    scale = torch.tensor([0.5])
    bound(_aligned((16, 1024), offset=1), scale)
    bound(x, _aligned((1,), torch.float32, offset=1))
    bound(x, torch.tensor([0.5], dtype=torch.float64))
    monkeypatch.setattr(dl, "_current_device", lambda: 1)
    bound(x, scale)
    monkeypatch.setattr(dl, "_current_device", lambda: -1)
    for name in ("launch_enter_hook", "launch_exit_hook"):
        hook = getattr(triton.knobs.runtime, name)
        if hasattr(hook, "add"):  # a HookChain (newer Triton): a hook is added to it
            hook.add(_a_hook)
            bound(x, scale)
            hook.remove(_a_hook)
        else:  # a plain attribute: a function or None
            monkeypatch.setattr(triton.knobs.runtime, name, _a_hook)
            bound(x, scale)
            monkeypatch.setattr(triton.knobs.runtime, name, hook)
    assert len(direct) == 6 and not compiled.calls
    bound(x, scale)
    assert len(compiled.calls) == 1


def _a_hook(*args):
    return None


@pytest.mark.parametrize("hook, hooked", [(None, False), (_a_hook, True)])
def test_hooked_reads_functions_and_chains(hook, hooked):
    assert dl.hooked(hook) is hooked
    chain = type("Chain", (), {"calls": [hook] if hook else []})()
    assert dl.hooked(chain) is hooked


def test_bound_launch_on_rocm_checks_storages_within_2_gib(direct, monkeypatch):
    """Triton's HIP backend specializes on a storage within 2 GiB (buffer ops): a direct launch
    needs the input's and the scale's storages to be; q's exact size is part of the key."""
    monkeypatch.setattr(dl, "_HIP", True)
    big = torch.empty(2**31 + 64, dtype=torch.bfloat16, device="meta")
    x = _aligned((16, 1024))
    bound = _bind(x)
    assert bound.resolved.spec[3] == (torch.float8_e4m3fn, True, True)
    compiled = _file(bound.resolved.spec, _Run())
    bound(x, torch.tensor([0.5]))
    assert len(compiled.calls) == 1
    knobs = triton.knobs.runtime
    assert not dl.may_run_now(knobs, -1, big[: 16 * 1024].view(16, 1024), torch.tensor([0.5]))
    assert dl.may_run_now(knobs, -1, x, torch.tensor([0.5]))


def test_bound_launch_views_rows_and_skips_empty_inputs(direct):
    x = _aligned((2, 8, 1024))
    bound = _bind(x, act="silu_and_mul", key_name="int8_dynamic_token")
    q, s = bound(x, None)
    assert q.shape == (2, 8, 512) and s.shape == (2, 8, 1)
    assert direct[0][1][0].shape == (16, 1024) and direct[0][1][0].data_ptr() == x.data_ptr()
    empty = _bind(torch.zeros(0, 3, 1024, dtype=torch.bfloat16), key_name="int8_dynamic_token")
    q, s = empty(torch.zeros(0, 3, 1024, dtype=torch.bfloat16), None)
    assert q.shape == (0, 3, 1024) and s.shape == (0, 3, 1) and len(direct) == 1 and empty.resolved.plan is None


def test_bound_launch_replans_after_reset_plans(direct):
    """A reset forgets plans and compiled kernels alike: a bound launch held elsewhere (a validated
    call) plans again and goes direct once its kernel is compiled (filed) again."""
    x = _aligned((16, 1024))
    bound = _bind(x)
    _file(bound.resolved.spec, _Run())
    plan = bound.resolved.plan
    bound(x, torch.tensor([0.5]))
    assert not direct, "direct"
    launch.reset_plans()
    assert _bind(x) is not bound
    bound(x, torch.tensor([0.5]))  # plans again; the compiled kernel was forgotten: the generic launch
    r = bound.resolved
    assert r.plan is not plan and r.plan.kernel_id == plan.kernel_id and len(direct) == 1
    _file(r.spec, _Run())
    bound(x, torch.tensor([0.5]))
    assert r.direct[0] is not None and len(direct) == 1


def test_a_reset_during_planning_is_seen_by_the_next_call(direct, monkeypatch):
    """A bound launch publishes its plan as one object, stamped with the generation read before
    planning: a ``reset_plans`` from another thread while it plans makes the next call plan again,
    and no call ever sees a half-made plan (M > 0 always launches)."""
    x = _aligned((16, 1024))
    bound = _bind(x)
    real = launch._plan

    def plan_during_a_reset(*args):
        runtime.reset()  # another thread's reset, mid-planning
        return real(*args)

    monkeypatch.setattr(launch, "_plan", plan_during_a_reset)
    runtime.reset()
    bound(x, torch.tensor([0.5]))
    stamped = bound.resolved.generation
    assert stamped == runtime.generation() - 1 and bound.resolved.plan is not None and len(direct) == 1
    monkeypatch.setattr(launch, "_plan", real)
    bound(x, torch.tensor([0.5]))
    assert bound.resolved.generation == runtime.generation() and len(direct) == 2


def test_a_triton_outside_the_tested_range_always_launches_through_its_jit(direct, monkeypatch):
    """The direct launch was written against the launcher of the tested ``triton.knobs`` releases;
    with another Triton nothing is filed for it and every launch goes through Triton's JIT."""
    assert dl.usable(_Compiled([]))
    monkeypatch.setattr(dl, "version_ok", lambda: False)
    x = _aligned((16, 1024))
    bound = launch.bind_rows(x, x, "relu2", "fp8_static_tensor", True, torch.float8_e4m3fn,
                             {"BLOCK_M": 8, "BLOCK_N": 1024, "num_warps": 8})  # a tuning config: not cached
    assert bound.resolved.spec is None
    assert not dl.usable(_Compiled([]))
    bound(x, torch.tensor([0.5]))
    bound(x, torch.tensor([0.5]))
    assert len(direct) == 2


def _file(spec, compiled):
    """File ``compiled`` as the compiled kernel of ``spec``, as ``_launch`` does after a JIT launch."""
    return launch._COMPILED.put(spec, compiled, runtime.generation())


@pytest.mark.parametrize("device,nvidia,arch,interpreting,env,expected", [
    (0, True, "sm_90", False, None, True),  # Hopper, CUDA build: on by default
    (0, True, "sm_100", False, None, True),
    (0, True, "sm_90", False, "off", False),  # FUSED_QUANT_PDL=off: plain launches
    (0, True, "sm_89", False, None, False),  # before Hopper: no griddepcontrol
    (0, False, "sm_90", False, None, False),  # ROCm build
    (0, True, "sm_90", True, None, False),  # interpreter, CUDA tensors: no PTX
    (-1, True, "sm_90", False, None, False),  # interpreter (CPU tensors)
])
def test_pdl_only_on_nvidia_sm90_and_not_when_switched_off(monkeypatch, device, nvidia, arch, interpreting, env,
                                                           expected):
    """The kernels' PDL constexpr and Triton's launch_pdl option go together, and only where the
    prologue's griddepcontrol can run; every plan (producers and GEMMs) carries them."""
    from fused_quant.gemm import GemmProblem
    from fused_quant.kernels import gemm_launch

    monkeypatch.setattr(launch, "_NVIDIA_TORCH", nvidia)
    monkeypatch.setattr(launch, "_interpreting", lambda: interpreting)
    monkeypatch.setattr(launch, "_cuda_arch", lambda index: arch)
    monkeypatch.setattr(launch, "_num_sms", lambda index: 2)
    monkeypatch.setattr(launch, "device_name", lambda index: "NVIDIA H200")  # the int8 GEMM's tile rows
    if expected and not launch.triton_has_pdl():
        pytest.skip("this Triton has no launch_pdl option or grid dependency control")
    if env is None:
        monkeypatch.delenv("FUSED_QUANT_PDL", raising=False)
    else:
        monkeypatch.setenv("FUSED_QUANT_PDL", env)
    runtime.reset()
    from fused_quant.kernels.triton import pdl

    def same(a, b):  # the value and its type (True would compile another specialization than 1)
        return type(a) is type(b) and a == b

    wait_first = pdl.WAIT_FIRST.value if expected else False  # GEMMs
    launch_first = pdl.LAUNCH_FIRST.value if expected else False  # producers and the split-K epilogue
    on = {"launch_pdl": True} if expected else {}
    for first, want in ((False, wait_first), (True, launch_first)):
        got = launch.pdl_options(device, launch_first=first)
        assert got == {"PDL": want, **on} and same(got["PDL"], want), (first, got)
    plan = launch._plan("silu_and_mul", "fp8_dynamic_token", torch.bfloat16, True, torch.float8_e4m3fn, 16, 1024,
                        False, device, None)
    assert same(plan.kwargs["PDL"], launch_first) and ("launch_pdl" in plan.kwargs) == expected
    assert same(plan.consts[-1], launch_first)  # PDL, the last constexpr of every kernel
    dev = torch.device("cuda", device) if device >= 0 else torch.device("cpu")
    p = GemmProblem(16, 4096, 14336, "fp8", torch.float8_e4m3fn, torch.bfloat16, dev, True, True, False)
    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=4, num_warps=4, num_stages=4)
    call = gemm_launch.SmallMCall(p, cfg)
    int8 = gemm_launch._triton_int8_call(dataclasses.replace(p, kind="int8", x_dtype=torch.int8))
    for kernel, want in ((call.main, wait_first), (call.reduce, launch_first), (int8, wait_first)):
        assert same(kernel.plan.kwargs["PDL"], want) and ("launch_pdl" in kernel.plan.kwargs) == expected
    # 64 N blocks x 4 splits, each streaming 14336 / 4 bytes of its rows, one token block: evict first
    lines = gemm_launch.prefetch_lines(64, 64 * 4, 14336 // 4, True) if expected else 0
    assert call.main.plan.kwargs["PREFETCH"] == lines and (lines > 0) == expected
    assert call.main.plan.kwargs["EVICT_W"] == ("evict_first" if expected else "")
    # four token blocks read each weight line: the default policy, the same prefetch per N block and split
    wide = gemm_launch.SmallMCall(dataclasses.replace(p, m=64), cfg)
    assert wide.main.plan.kwargs["EVICT_W"] == "" and wide.main.plan.kwargs["PREFETCH"] == lines


@pytest.mark.parametrize("missing", ["gdc", "launch_pdl"])
def test_pdl_stays_off_with_a_triton_that_lacks_it(monkeypatch, missing):
    """A Triton without grid dependency control in its language, or without the launch_pdl launch
    option, gets plain launches on SM90 too (the kernels' prologue compiles to nothing)."""
    from triton.backends.nvidia.compiler import CUDAOptions

    from fused_quant.kernels.triton import pdl

    monkeypatch.setattr(launch, "_NVIDIA_TORCH", True)
    monkeypatch.setattr(launch, "_interpreting", lambda: False)
    monkeypatch.setattr(launch, "_cuda_arch", lambda index: "sm_90")
    monkeypatch.delenv("FUSED_QUANT_PDL", raising=False)
    if missing == "gdc":
        monkeypatch.setattr(pdl, "gdc_wait", None)
    else:
        fields = {k: v for k, v in getattr(CUDAOptions, "__dataclass_fields__", {}).items() if k != "launch_pdl"}
        monkeypatch.setattr(CUDAOptions, "__dataclass_fields__", fields)
    runtime.reset()
    assert launch.pdl_options(0) == {"PDL": False}


def test_pdl_switch_is_checked(monkeypatch):
    """A FUSED_QUANT_PDL value that is neither on nor off is an error naming the variable."""
    from fused_quant import envs

    monkeypatch.setenv("FUSED_QUANT_PDL", "maybe")
    with pytest.raises(ValueError, match="FUSED_QUANT_PDL='maybe' is not one of on, off"):
        envs.pdl()
    assert "FUSED_QUANT_PDL" in envs.errors()
    monkeypatch.setenv("FUSED_QUANT_PDL", " Off ")  # case and spaces aside
    assert envs.pdl() is False
    monkeypatch.setenv("FUSED_QUANT_PDL", " Maybe")  # refused as it was set
    with pytest.raises(ValueError, match="FUSED_QUANT_PDL=' Maybe' is not one of on, off"):
        envs.pdl()
    runtime.reset()
    with pytest.raises(ValueError, match="FUSED_QUANT_PDL"):  # also where PDL could not run (the interpreter)
        launch.pdl_options(-1)


def _called(func) -> str:
    """``tl.name`` for a Triton language function, the method name for a method (``x.to``), else the name."""
    import ast

    if isinstance(func, ast.Attribute):
        return ast.unparse(func) if ast.unparse(func.value) == "tl" else func.attr
    return ast.unparse(func)


@pytest.mark.parametrize("module,names", [
    ("act_quant", KERNELS),
    ("small_m_gemm", ("small_m_gemm_kernel", "split_k_epilogue_kernel")),
    ("int8_gemm", ("scaled_int8_gemm_kernel", "scaled_int8_gemm_tma_kernel")),
])
def test_every_kernel_takes_pdl_last(module, names):
    """Each kernel of the package has the PDL constexpr (its prologue's switch) as its last argument,
    where the plans' ``consts`` put it, and calls ``pdl_prologue(PDL)`` before any memory access: what
    comes before it (after the docstring), and inside the package's device functions it calls there,
    only reads program ids and computes, except the small-M GEMM's L2 prefetch of its weight
    (``prefetch_l2``, under ``if PREFETCH > 0``)."""
    import ast
    import importlib
    import inspect
    import textwrap

    mod = importlib.import_module(f"fused_quant.kernels.triton.{module}")
    before_wait = {"tl.program_id", "tl.num_programs", "tl.arange", "tl.cdiv", "tl.minimum", "tl.where", "to",
                   "prefetch_l2"}

    def body_of(fn):
        return ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body

    def calls_in(statements) -> set:
        """Names called in ``statements``, and in the module's device functions they call (recursively)."""
        names = set()
        for c in (c for st in statements for c in ast.walk(st) if isinstance(c, ast.Call)):
            name = _called(c.func)
            helper = getattr(mod, name, None) if name != "prefetch_l2" else None
            names |= calls_in(body_of(helper.fn)) if hasattr(helper, "fn") else {name}
        return names

    for name in names:
        fn = getattr(mod, name).fn
        params = list(inspect.signature(fn).parameters)
        assert params[-1] == "PDL", f"{name}: {params}"
        body = body_of(fn)
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        at = [i for i, st in enumerate(body) if ast.unparse(st) == "pdl_prologue(PDL)"]
        assert len(at) == 1, f"{name} calls pdl_prologue(PDL) {len(at)} times at its top level"
        calls = calls_in(body[:at[0]])
        assert calls <= before_wait, f"{name} calls {sorted(calls - before_wait)} before its grid dependency wait"
        prefetches = [st for st in body[:at[0]] if "prefetch_l2" in ast.unparse(st)]
        assert all(ast.unparse(st).startswith("if PREFETCH > 0:") for st in prefetches), name


def test_prefetch_lines_and_weight_eviction(monkeypatch):
    """The small-M GEMM's early L2 prefetch per weight row and program: the largest power of two of
    128-byte lines whose total over all programs stays within ``PREFETCH_BYTES`` (one line at least),
    capped at the power of two that covers the program's K range; none without PDL, without a budget
    or with nothing to stream. Weight loads evict first only where one token block reads each line."""
    from fused_quant.kernels import gemm_launch as g

    budget = 4 << 20
    monkeypatch.setattr(g, "PREFETCH_BYTES", budget)
    # (block_n, programs, k_bytes): lines, worked out by hand
    for args, want in (((128, 128, 3584), 2),  # FP8 down at M = 1: 2 lines, 4 MB
                       ((32, 192, 4096), 4),  # 5.3 lines fit: 4
                       ((256, 112, 4096), 1),  # 1.1 lines fit: 1 (3.5 MB)
                       ((256, 448, 4096), 1),  # not one line fits: one line anyway
                       ((64, 64, 300), 4),  # 8 lines fit, 3 cover K: 4
                       ((16, 1, 16), 1),  # the whole budget, one line of K
                       ((16, 1, 1 << 20), 2048)):  # 2048 lines x 16 rows x 128 B = 4 MB
        assert g.prefetch_lines(*args, True) == want, (args, g.prefetch_lines(*args, True))
    for block_n in (16, 32, 64, 128, 256, 512):
        for programs in (1, 7, 112, 128, 192, 1024):
            for k_bytes in (1, 100, 128, 129, 3584, 14336):
                lines = g.prefetch_lines(block_n, programs, k_bytes, True)
                cover = 1 << (-(-k_bytes // 128) - 1).bit_length()  # lines that cover k_bytes, a power of two
                total = programs * block_n * lines * 128
                assert lines >= 1 and lines & (lines - 1) == 0 and lines <= cover, (block_n, programs, k_bytes, lines)
                assert lines == cover or budget < 2 * total, (block_n, programs, k_bytes, lines)
                assert total <= budget or lines == 1, (block_n, programs, k_bytes, lines)
                assert g.prefetch_lines(block_n, programs, k_bytes, False) == 0
    assert g.prefetch_lines(128, 0, 4096, True) == 0 and g.prefetch_lines(128, 128, 0, True) == 0
    monkeypatch.setattr(g, "PREFETCH_BYTES", 0)
    assert g.prefetch_lines(128, 128, 4096, True) == 0
    assert g.weight_eviction(1) == "evict_first"
    assert g.weight_eviction(2) == "" and g.weight_eviction(16) == ""


def test_gemm_kernel_call_goes_direct_with_addresses_once_compiled(monkeypatch):
    """A GEMM's ``KernelCall`` launches through Triton's JIT (tensors) until a compiled kernel for
    16-byte aligned operands exists, then directly with the operands' addresses, the scalars and the
    plan's constexprs; an unaligned operand goes through the JIT again."""
    from fused_quant.kernels import gemm_launch

    compiled = _Run()
    generic = []

    def jit(plan, args):
        generic.append(args)
        return compiled

    monkeypatch.setattr(launch, "_launch", jit)
    monkeypatch.setattr(dl, "_HIP", False)
    monkeypatch.setattr(dl, "_current_device", lambda: 0)
    monkeypatch.setattr(dl, "raw_stream", lambda index: ("stream", index))
    plan = launch._Plan(None, (3, 2, 1), {"A": 7, "num_warps": 4}, (7,), "small_m", None, object())
    call = gemm_launch.KernelCall(plan, 0)
    a, b = _aligned((16, 64)), _aligned((8,), torch.float32)
    call((a, b), (16, 64))
    assert generic == [(a, b, 16, 64)] and not compiled.calls
    a2 = _aligned((16, 64))
    call((a2, b), (16, 5))
    assert compiled.calls == [(3, 2, 1, ("stream", 0), "function", "metadata", None, None, None,
                               a2.data_ptr(), b.data_ptr(), 16, 5, 7)]
    unaligned = _aligned((16, 64), offset=1)
    call((unaligned, b), (16, 64))
    assert len(generic) == 2 and generic[1][0] is unaligned and len(compiled.calls) == 1


@pytest.mark.parametrize("shape", [(16, 1024), (1, 28672), (2, 8, 1), (0, 3, 1024), (4, 0, 2), (7,), ()])
def test_contiguous_strides_are_torchs(shape):
    assert dl.contiguous_strides(shape) == torch.empty(shape).stride()
    out = torch.empty_strided(shape, dl.contiguous_strides(shape))
    assert out.is_contiguous() and out.shape == shape


def test_int8_gemm_tiles_follow_the_gpu_model_where_it_has_rows(monkeypatch):
    """The Triton int8 GEMM's tile rows: a GPU model's own (``INT8_GEMM_DEVICE_CONFIGS``, by the name CUDA reports)
    where measured, else ``INT8_GEMM_CONFIGS``; the interpreter's CPU tensors never ask for a name. A bound call's
    launch takes the tile of its M's row, through descriptors (one program per tile, or a persistent grid of one per
    SM, flattened or not) where the row says so."""
    from fused_quant.gemm import GemmProblem
    from fused_quant.kernels import gemm_launch as g

    own = "NVIDIA A GPU MODEL"
    names = {0: own, 1: "NVIDIA H200"}
    asked = []
    monkeypatch.setattr(launch, "device_name", lambda index: asked.append(index) or names[index])
    monkeypatch.setattr(launch, "pdl_options", lambda index, launch_first=False: {})
    monkeypatch.setattr(launch, "_num_sms", lambda index: 132)
    own_rows = ((256, 32, 32, 32, 4, 4, 2, "pointers"), (1 << 62, 64, 64, 64, 4, 4, 2, "tma"))
    monkeypatch.setattr(g, "INT8_GEMM_DEVICE_CONFIGS", {own: own_rows})
    assert g.int8_gemm_rows(0) is own_rows
    assert g.int8_gemm_rows(1) is g.INT8_GEMM_CONFIGS
    assert g.int8_gemm_rows(-1) is g.INT8_GEMM_CONFIGS and asked == [0, 1]
    # the rows cover every M in order, each read in one of the ways there are
    for rows in (g.INT8_GEMM_CONFIGS, own_rows):
        assert rows[-1][0] >= 1 << 62 and [r[0] for r in rows] == sorted(r[0] for r in rows)
        assert all(len(r) == 8 and r[-1] in g.INT8_LOADS for r in rows)

    def launch_of(index, m, tma):
        runtime.reset()
        p = GemmProblem(m, 28672, 512, "int8", torch.int8, torch.bfloat16, torch.device("cuda", index), True, True,
                        False)
        plan = g._triton_int8_call(p, tma).plan
        kw = plan.kwargs
        tile = kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["GROUP_M"], kw["num_warps"], kw["num_stages"]
        return tile, plan.kernel.fn.__name__, plan.grid[0], kw.get("FLATTEN")

    try:
        pointers, tma = "scaled_int8_gemm_kernel", "scaled_int8_gemm_tma_kernel"
        assert launch_of(1, 100, False) == ((64, 128, 128, 8, 4, 4), pointers, 2 * 224, None)
        # past 256 tokens the default rows read through descriptors on a persistent grid (at most one program per SM)
        assert launch_of(1, 300, True) == ((128, 128, 256, 8, 8, 3), tma, 132, True)
        assert launch_of(1, 1024, True) == ((128, 256, 128, 8, 8, 4), tma, 132, True)
        assert launch_of(1, 5000, True) == ((128, 256, 128, 16, 8, 3), tma, 132, False)
        # the pointer kernel in the same tile, one program per tile, where descriptors cannot be made
        assert launch_of(1, 1024, False) == ((128, 256, 128, 8, 8, 4), pointers, 8 * 112, None)
        assert launch_of(0, 1024, True) == ((64, 64, 64, 4, 4, 2), tma, 16 * 448, False)  # the model's own rows
        assert launch_of(0, 100, False) == ((32, 32, 32, 4, 4, 2), pointers, 4 * 896, None)
        # a sweep's override of both tables (benchmarks/sweep_int8_gemm.py) reaches every GPU model
        monkeypatch.setattr(g, "INT8_GEMM_CONFIGS", ((1 << 62, 64, 64, 64, 4, 4, 2, "pointers"),))
        monkeypatch.setattr(g, "INT8_GEMM_DEVICE_CONFIGS", {})
        assert launch_of(0, 1024, False)[0] == launch_of(1, 1024, False)[0] == (64, 64, 64, 4, 4, 2)
    finally:
        runtime.reset()
