"""The driver launch's layout of a compiled kernel's parameters (``fused_quant.kernels.driver_launch``).

No GPU: a ctypes callback stands in for ``cuLaunchKernelEx`` and reads back, through the very pointers
the launch passes, the configuration and every parameter slot. The GPU rows launch real kernels this way
(every bound eager call on NVIDIA) and compare their bits with the reference.
"""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import pytest

from fused_quant.kernels import driver_launch as dv

PTX = """
.version 8.7
.target sm_90a
.visible .entry small_m_gemm_kernel(
	.param .u64 .ptr .global .align 1 small_m_gemm_kernel_param_0,
	.param .u64 .ptr .global .align 1 small_m_gemm_kernel_param_1,
	.param .u32 small_m_gemm_kernel_param_2,
	.param .u64 small_m_gemm_kernel_param_3,
	.param .f32 small_m_gemm_kernel_param_4,
	.param .u64 .ptr .global .align 1 small_m_gemm_kernel_param_5,
	.param .u64 .ptr .global .align 1 small_m_gemm_kernel_param_6
)
.reqntid 128
{
	ret;
}
"""
SIGNATURE = {"x_ptr": "*i8", "w_ptr": "*fp8e4nv", "M": "i32", "one": "constexpr", "stride": "i64", "alpha": "fp32",
             "BLOCK_N": "constexpr"}


def _compiled(ptx=PTX, signature=SIGNATURE, function=0xF00D, name="kernel", **meta):
    fields = dict(num_warps=4, shared=2048, launch_pdl=True, num_ctas=1, launch_cooperative_grid=False,
                  global_scratch_size=0, profile_scratch_size=0)
    fields.update(meta)
    return SimpleNamespace(metadata=SimpleNamespace(**fields), asm={"ptx": ptx}, src=SimpleNamespace(signature=signature),
                           function=function, name=name)


class _FakeDriver:
    """``cuLaunchKernelEx`` as a ctypes callback: records what a launch hands the driver."""

    def __init__(self, rc=0, slots=7):
        self.seen, self.rc, self.slots = [], rc, slots  # slots: the parameters of the kernel launched
        self.contexts = []  # the devices whose context a launch asked to make current
        proto = ctypes.CFUNCTYPE(ctypes.c_int, *(ctypes.c_void_p,) * 4)
        self.launch = proto(self._launch)
        name_proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
        self._text = ctypes.c_char_p(b"CUDA_ERROR_INVALID_VALUE")
        self.name = name_proto(self._name)

    def _launch(self, config_at, function, params_at, extra):
        c = dv._Config.from_address(config_at)
        attrs = [(c.attrs[i].id, c.attrs[i].value) for i in range(c.numAttrs)]
        slots = (ctypes.c_void_p * self.slots).from_address(params_at)
        raw = [ctypes.string_at(slots[i], 8) for i in range(self.slots)]
        self.seen.append((function, (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ),
                          c.sharedMemBytes, c.hStream, attrs, raw, extra))
        return self.rc

    def ensure_context(self, index):
        self.contexts.append(index)
        return False

    def _name(self, rc, out):
        out[0] = self._text.value
        return 0


@pytest.fixture
def fake(monkeypatch):
    d = _FakeDriver()
    monkeypatch.setattr(dv, "_driver", lambda: dv._Driver(d.launch, d.name, d.ensure_context))
    return d


def test_ptx_params_read_the_entry_in_order():
    assert dv.ptx_params(PTX) == [8, 8, 4, 8, 4, 8, 8]
    assert dv.ptx_params(PTX + PTX) is None, "two entries: which one is launched is not known"
    assert dv.ptx_params(".version 8.7") is None


def test_layout_drops_constexprs_and_counts_the_scratch_pointers():
    keep, fmt, scratch = dv.layout(list(SIGNATURE.values()), dv.ptx_params(PTX))
    assert keep == (0, 1, 2, 4, 5) and scratch == 2
    assert struct.calcsize(fmt) == 8 * len(keep), "one 8-byte slot per parameter"


@pytest.mark.parametrize("signature,sizes,why", [
    (["*i8", "bf16"], [8, 2], "a bf16 scalar has no struct format"),
    (["*i8", "i32"], [8, 8], "an i32 where the PTX takes 8 bytes"),
    (["*i8", "i32"], [8], "the PTX has fewer parameters than the signature"),
    (["*i8"], [8, 8, 8, 8], "more than two trailing parameters"),
    (["*i8"], [8, 4], "a trailing parameter that is not a pointer"),
])
def test_layout_refuses_what_does_not_match(signature, sizes, why):
    assert dv.layout(signature, sizes) is None, why


def test_a_launch_hands_the_driver_triton_s_configuration_and_the_packed_arguments(fake):
    launch = dv.of(_compiled(), (3, 2, 1), 0)
    assert isinstance(launch, dv.DriverLaunch)
    args = (0x7F0000001000, 0x7F0000002000, 17, 1, 1 << 40, 0.5, 64)  # constexprs passed as Triton's runner does
    launch(0x1234, args)
    launch(0, args[:2] + (18,) + args[3:])
    (function, grid, block, shared, stream, attrs, raw, extra), second = fake.seen
    assert function == 0xF00D and grid == (3, 2, 1) and block == (128, 1, 1) and shared == 2048 and extra is None
    assert stream == 0x1234 and second[4] is None, "the stream of each call (0: the default stream)"
    assert attrs == [(dv._PDL_ATTRIBUTE, 1)]
    assert struct.unpack("<Q", raw[0])[0] == 0x7F0000001000 and struct.unpack("<Q", raw[1])[0] == 0x7F0000002000
    assert struct.unpack("<i", raw[2][:4])[0] == 17 and struct.unpack("<i", second[6][2][:4])[0] == 18
    assert struct.unpack("<q", raw[3])[0] == 1 << 40
    assert struct.unpack("<f", raw[4][:4])[0] == 0.5
    assert raw[5] == raw[6] == b"\0" * 8, "no global / profile scratch: null pointers"


def test_without_pdl_no_attribute(fake):
    dv.of(_compiled(launch_pdl=False), (1, 1, 1), 0)(7, (1, 2, 3, 1, 4, 1.0, 64))
    assert fake.seen[0][5] == []


@pytest.mark.parametrize("meta,why", [
    (dict(num_ctas=2), "clusters"), (dict(launch_cooperative_grid=True), "cooperative grid"),
    (dict(global_scratch_size=64), "global scratch to allocate"), (dict(profile_scratch_size=64), "profile scratch"),
])
def test_kernels_it_does_not_lay_out_keep_tritons_launcher(fake, meta, why):
    assert dv.of(_compiled(**meta), (1, 1, 1), 0) is None, why


def test_no_launch_for_an_empty_grid_an_unloaded_kernel_or_without_a_driver(fake, monkeypatch):
    assert dv.of(_compiled(), (0, 1, 1), 0) is None
    assert dv.of(_compiled(function=None), (1, 1, 1), 0) is None
    monkeypatch.setattr(dv, "_driver", lambda: None)
    assert dv.of(_compiled(), (1, 1, 1), 0) is None


def test_a_refused_launch_raises_with_the_driver_s_error_name(fake):
    fake.rc = 1
    launch = dv.of(_compiled(name="act_quant_kernel"), (3, 1, 1), 2)
    with pytest.raises(dv.DriverError, match=r"CUDA_ERROR_INVALID_VALUE \(1\), launching kernel act_quant_kernel "
                                             r"over grid \(3, 1, 1\) on CUDA device 2$"):
        launch(0, (1, 2, 3, 1, 4, 1.0, 64))


def test_a_grid_past_cuda_s_limits_keeps_triton_s_launcher(fake):
    """The config's grid fields are 32-bit: 2^32 + 5 programs would launch 5. Past CUDA's limits (x 2^31 - 1, y and
    z 65535) Triton's launcher takes the launch, and refuses it."""
    assert dv.of(_compiled(), (2**31 - 1, 65535, 65535), 0) is not None
    for grid in ((2**32 + 5, 1, 1), (2**31, 1, 1), (1, 65536, 1), (1, 1, 65536)):
        assert dv.of(_compiled(), grid, 0) is None, grid


def test_an_argument_of_the_wrong_type_raises_before_the_driver_is_called(fake):
    launch = dv.of(_compiled(), (1, 1, 1), 0)
    with pytest.raises(struct.error):
        launch(0, (1, 2, 1 << 40, 1, 4, 1.0, 64))  # 2**40 does not fit the i32 parameter
    assert fake.seen == []


def test_direct_of_takes_the_driver_launch_where_it_lays_the_kernel_out(fake, monkeypatch):
    from fused_quant.kernels import direct_launch as dl

    monkeypatch.setattr(dl, "_HIP", False)
    compiled = _compiled()
    calls = []
    compiled.run = lambda *a: calls.append(a)
    compiled.packed_metadata = "meta"
    assert isinstance(dl.direct_of(compiled, (2, 1, 1), 0), dv.DriverLaunch)
    monkeypatch.setattr(dl, "DRIVER_LAUNCH", False)
    triton_launch = dl.direct_of(compiled, (2, 1, 1), 0)
    assert not isinstance(triton_launch, dv.DriverLaunch)
    triton_launch(9, (1, 2))
    assert calls == [(2, 1, 1, 9, 0xF00D, "meta", None, None, None, 1, 2)], "Triton's launcher, as its runner calls it"
    monkeypatch.setattr(dl, "DRIVER_LAUNCH", True)
    clustered = _compiled(num_ctas=2)
    clustered.run, clustered.packed_metadata = compiled.run, "meta"
    dl.direct_of(clustered, (2, 1, 1), 0)(9, (3,))
    assert calls[-1][-1] == 3, "a kernel the driver launch does not lay out keeps Triton's launcher"


@pytest.mark.parametrize("args", [(1, 2, 3, 1, 4, 1.0), (1, 2, 3, 1, 4, 1.0, 64, 0)], ids=["one short", "one more"])
def test_a_wrong_number_of_arguments_raises_before_the_driver_is_called(fake, args):
    """Arguments one place off would put a size where the kernel reads an address."""
    launch = dv.of(_compiled(), (1, 1, 1), 0)
    with pytest.raises(TypeError, match=f"takes 7 arguments .*got {len(args)}"):
        launch(0, args)
    assert fake.seen == []


def test_launches_from_two_threads_each_hand_over_their_own_arguments(fake, monkeypatch):
    """The slots are shared by every launch of the kernel, and the driver call lets other threads run: one
    launch's arguments must stay in place until the driver has read them (here it reads them twice, with a
    pause between, as a slow driver might)."""
    import threading
    import time

    seen = []

    def slow(config_at, function, params_at, extra):
        slots = (ctypes.c_void_p * 7).from_address(params_at)
        first = ctypes.string_at(slots[2], 4)
        time.sleep(0.0005)
        seen.append((dv._Config.from_address(config_at).hStream, first, ctypes.string_at(slots[2], 4)))
        return 0

    proto = ctypes.CFUNCTYPE(ctypes.c_int, *(ctypes.c_void_p,) * 4)
    slow_c = proto(slow)
    monkeypatch.setattr(dv, "_driver", lambda: dv._Driver(slow_c, fake.name, fake.ensure_context))
    launch = dv.of(_compiled(), (1, 1, 1), 0)

    def worker(tag):
        for _ in range(40):
            launch(tag, (1, 2, tag, 1, 4, 1.0, 64))

    threads = [threading.Thread(target=worker, args=(tag,)) for tag in (11, 22)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 80
    for stream, first, second in seen:
        assert first == second == struct.pack("<i", stream), "another launch's arguments were handed over"


def test_the_installed_triton_s_kernels_are_laid_out(fake):
    """A kernel compiled by the installed Triton for sm_90 (PTX and signature only; no GPU needed): its
    pointers, an i32, an fp32 and the constexprs (a 1 among them, as Triton's JIT specializes it) are laid out
    as the PTX entry declares them, the scratch pointers Triton appends stay null, and PDL is asked for. A
    Triton that passes its kernels' parameters otherwise fails here rather than falling back unnoticed."""
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    def scale_kernel(x_ptr, y_ptr, n, alpha, ONE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha * ONE, mask=mask)

    # JITFunction, not triton.jit: under TRITON_INTERPRET=1 the decorator gives an interpreted function, which
    # does not compile to PTX
    scale_kernel = JITFunction(scale_kernel)

    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "alpha": "fp32", "ONE": "constexpr",
                 "BLOCK": "constexpr"}
    src = ASTSource(fn=scale_kernel, signature=signature, constexprs={"ONE": 1, "BLOCK": 128})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"launch_pdl": True})
    compiled.function = 0xF00D  # what loading it would set
    sizes = dv.ptx_params(compiled.asm["ptx"])
    assert sizes is not None and sizes[:4] == [8, 8, 4, 4], sizes
    launch = dv.of(compiled, (5, 1, 1), 0)
    assert isinstance(launch, dv.DriverLaunch), "the installed Triton's kernel was not laid out"
    fake.slots = len(sizes)
    launch(3, (0x7F0000000100, 0x7F0000000200, 1000, 2.5, 1, 128))
    function, grid, block, shared, stream, attrs, raw, _ = fake.seen[0]
    assert grid == (5, 1, 1) and block == (32 * compiled.metadata.num_warps, 1, 1) and stream == 3
    assert attrs == [(dv._PDL_ATTRIBUTE, 1)]
    assert [struct.unpack("<Q", r)[0] for r in raw[:2]] == [0x7F0000000100, 0x7F0000000200]
    assert struct.unpack("<i", raw[2][:4])[0] == 1000 and struct.unpack("<f", raw[3][:4])[0] == 2.5
    assert all(r == b"\0" * 8 for r in raw[4:len(sizes)]), "scratch pointers"


def test_a_thread_without_a_current_context_gets_the_device_s_primary_context_and_launches(fake, monkeypatch):
    """A launch refused for want of a current context (a thread that has run nothing through torch's runtime)
    makes the kernel's device's primary context current and launches once more; any other refusal raises."""
    answers = [dv._INVALID_CONTEXT, 0]
    made = []
    proto = ctypes.CFUNCTYPE(ctypes.c_int, *(ctypes.c_void_p,) * 4)
    launch_c = proto(lambda *a: answers.pop(0))
    monkeypatch.setattr(dv, "_driver", lambda: dv._Driver(launch_c, fake.name, lambda i: (made.append(i), True)[1]))
    dv.of(_compiled(), (1, 1, 1), 3)(0, (1, 2, 3, 1, 4, 1.0, 64))
    assert made == [3] and answers == []
    answers[:] = [dv._INVALID_CONTEXT, dv._INVALID_CONTEXT]
    monkeypatch.setattr(dv, "_driver", lambda: dv._Driver(launch_c, fake.name, lambda i: False))
    with pytest.raises(dv.DriverError, match=r"\(201\)"):
        dv.of(_compiled(), (1, 1, 1), 3)(0, (1, 2, 3, 1, 4, 1.0, 64))
    assert answers == [dv._INVALID_CONTEXT], "no second launch where no context was made current"


def test_the_context_ensurer_retains_and_sets_the_primary_context_only_where_none_is_current():
    calls = []
    current = [0]
    cfun = ctypes.CFUNCTYPE

    def get_current(out):
        ctypes.c_void_p.from_address(out).value = current[0] or None
        return 0

    def device_get(out, ordinal):
        calls.append(("device", ordinal))
        ctypes.c_int.from_address(out).value = 40 + ordinal
        return 0

    def retain(out, device):
        calls.append(("retain", device))
        ctypes.c_void_p.from_address(out).value = 0xC0
        return 0

    def set_current(ctx):
        calls.append(("set", ctx))
        current[0] = ctx
        return 0

    fns = (cfun(ctypes.c_int, ctypes.c_void_p)(get_current), cfun(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)(device_get),
           cfun(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)(retain), cfun(ctypes.c_int, ctypes.c_void_p)(set_current))
    ensure = dv.context_ensurer(*fns)
    assert ensure(2) is True and calls == [("device", 2), ("retain", 42), ("set", 0xC0)]
    assert ensure(2) is False and len(calls) == 3, "a context is current now: nothing to do"


def test_structures_and_constants_are_cuda_h_s():
    """The fake driver reads the configuration back through the same structures, so their layout is pinned
    here to cuda.h's (x86-64): CUlaunchConfig and CUlaunchAttribute, the PDL attribute's id and
    CUDA_ERROR_INVALID_CONTEXT."""
    assert ctypes.sizeof(dv._Config) == 56
    assert [getattr(dv._Config, f).offset for f in ("sharedMemBytes", "hStream", "attrs", "numAttrs")] == [24, 32, 40, 48]
    assert ctypes.sizeof(dv._Attribute) == 72 and dv._Attribute.value.offset == 8
    assert dv._PDL_ATTRIBUTE == 6 and dv._INVALID_CONTEXT == 201


def test_a_grid_of_other_than_three_dimensions_is_not_laid_out(fake):
    assert dv.of(_compiled(), (4, 1), 0) is None
