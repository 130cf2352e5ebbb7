"""GPU rows: the Triton producers of triton_fp8 and hip_w8a8 (forced on CUDA) are bitwise
equal to the reference on the same device, on sweeps, odd and model widths, strided rows,
M = 0, the two-pass kernel and tensors over 2^31 elements; plus opcheck of the custom ops."""

from __future__ import annotations

import pytest
import torch

from fused_quant import keys as K
from fused_quant.kernels import heuristics
from fused_quant.reference import act_quant_ref
from fused_quant.registry import fused_act_quant
from fused_quant.selftest import run_selftest
from fused_quant.validation import BackendUnavailableError
from tests.helpers import all_bf16_patterns, assert_bits_equal

pytestmark = pytest.mark.gpu

BACKENDS = [pytest.param("triton_fp8", marks=pytest.mark.triton_fp8),
            pytest.param("hip_w8a8", marks=pytest.mark.hip_w8a8)]
KEYS = list(K.KEYS.items())
CUDA = torch.device("cuda")


def _scale(key, value=0.37):
    return torch.tensor([value], dtype=torch.float32, device=CUDA) if K.is_static(key) else None


def _check(backend, act, x, key, numerics="default", scale_value=0.37):
    scale = _scale(key, scale_value)
    qa = fused_act_quant(act, x, key, scale, numerics=numerics, backend=backend)
    q, s = act_quant_ref(act, x, key, scale, numerics=numerics, fp8_dtype=qa.data.dtype
                         if K.is_fp8(key) else torch.float8_e4m3fn)
    assert_bits_equal(qa.data, q, f"{backend} {act} {K.key_name(key)} q")
    assert_bits_equal(qa.scale, s, f"{backend} {act} {K.key_name(key)} scale")
    return qa


@pytest.mark.parametrize("backend", BACKENDS)
def test_selftest_suite(backend):
    """Known answers, all 65,536 bf16 patterns per key, gate sweeps x up values, adversarial rows."""
    results = run_selftest(backend, CUDA)
    failed = [f"{r.name}: {r.detail}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)


# odd widths (1, 1023, 1025) hit masking; model widths (5120, 14336, 28672) the real launch configs
WIDTHS = [1, 1023, 1025, 5120, 14336, 28672]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name,key", KEYS)
@pytest.mark.parametrize("act", ["relu2", "silu_and_mul", "identity"])
@pytest.mark.parametrize("width", WIDTHS)
def test_random_widths_bf16(backend, key_name, key, act, width):
    torch.manual_seed(width)
    d_in = 2 * width if act == "silu_and_mul" else width
    x = (torch.randn(37, d_in, device=CUDA) * 3).to(torch.bfloat16)
    _check(backend, act, x, key)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_dynamic_token", "int8_dynamic_token"])
@pytest.mark.parametrize("m", [223, 224, 256, 257])
def test_wide_silu_token_rows_at_the_edges_of_their_window(backend, key_name, m):
    """The per-token silu_and_mul of Llama-3-8B's MLP at the edges of ``heuristics.silu_token_wide_rows``'s window
    (which plan runs where is ``tests/kernels/test_launch.py``'s): the reference's bits on either side."""
    torch.manual_seed(m)
    x = (torch.randn(m, 2 * 14336, device=CUDA) * 3).to(torch.bfloat16)
    x[0, :64] = 0  # a zero gate and up: zeros in the row that sets no scale
    x[-1, 7] = float("inf")
    _check(backend, "silu_and_mul", x, K.KEYS[key_name])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name,key", KEYS)
@pytest.mark.parametrize("numerics", ["default", "hcu"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fp16_fp32_and_profiles_rank3(backend, key_name, key, numerics, dtype):
    torch.manual_seed(7)
    x = (torch.randn(3, 5, 2 * 1000, device=CUDA) * 4).to(dtype)  # rank 3: leading dims flattened, restored
    qa = _check(backend, "silu_and_mul", x, key, numerics)
    assert qa.data.shape == (3, 5, 1000)
    if K.is_per_token(key):
        assert qa.scale.shape == (3, 5, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name,key", KEYS)
def test_rank1_and_empty(backend, key_name, key):
    x = torch.randn(2048, device=CUDA).to(torch.bfloat16)
    _check(backend, "silu_and_mul", x, key)
    empty = torch.empty(0, 4096, device=CUDA, dtype=torch.bfloat16)
    qa = _check(backend, "silu_and_mul", empty, key)
    assert qa.data.shape == (0, 2048)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name,key", KEYS)
def test_strided_rows_without_copy(backend, key_name, key):
    """Rows with a stride (a column slice of a wider buffer) are read in place."""
    big = torch.randn(64, 2 * 3000 + 96, device=CUDA).to(torch.bfloat16)
    x = big[:, : 2 * 3000]
    assert not x.is_contiguous()
    _check(backend, "silu_and_mul", x, key)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unviewable_input_declined_explicit_and_falls_back_implicit(backend, backend_env):
    x = torch.randn(4096, 64, device=CUDA).to(torch.bfloat16).t()  # last dim has stride 64
    with pytest.raises(BackendUnavailableError, match="strides"):
        fused_act_quant("relu2", x, K.kInt8DynamicTokenSym, backend=backend)
    backend_env(backend)
    qa = fused_act_quant("relu2", x, K.kInt8DynamicTokenSym)
    q, s = act_quant_ref("relu2", x, K.kInt8DynamicTokenSym)
    assert_bits_equal(qa.data, q)
    assert_bits_equal(qa.scale, s)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_dynamic_token", "int8_dynamic_token"])
@pytest.mark.parametrize("variant", [1, 2])
@pytest.mark.parametrize("numerics", ["default", "hcu"])
def test_two_pass_kernels_for_very_wide_rows(backend, key_name, variant, numerics, monkeypatch):
    """Rows wider than the one-pass limit: the persistent kernel (scratch in T, or fp32 for hcu)
    and the plain two-pass kernel give the same bits."""
    key = K.KEYS[key_name]
    if variant == 1:
        monkeypatch.setattr(heuristics, "token_launch",
                            lambda *args, **kwargs: {"variant": "two_pass", "BLOCK_N": 2048, "num_warps": 8})
    width = heuristics.config_for("sm_90").chunked_max_n + 4000
    x = torch.randn(9, 2 * width, device=CUDA).to(torch.bfloat16)
    x[3, 17] = float("nan")
    x[5] = 0
    _check(backend, "silu_and_mul", x, key, numerics)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_dynamic_token"])
def test_more_than_2_31_elements(backend, key_name):
    """64-bit offsets: the output has > 2^31 elements, the input > 2^32; checked on edge rows."""
    key = K.KEYS[key_name]
    d = 16384
    m = (1 << 31) // d + 3
    x = torch.empty(m, 2 * d, device=CUDA, dtype=torch.bfloat16).normal_()
    scale = _scale(key)
    qa = fused_act_quant("silu_and_mul", x, key, scale, backend=backend)
    assert qa.data.numel() > 1 << 31
    for rows in (slice(0, 4), slice(m - 4, m), slice(m // 2, m // 2 + 4)):
        q, s = act_quant_ref("silu_and_mul", x[rows], key, scale)
        assert_bits_equal(qa.data[rows], q, f"rows {rows}")
        if K.is_per_token(key):
            assert_bits_equal(qa.scale[rows], s, f"scale rows {rows}")


def test_custom_ops_opcheck():
    x = torch.randn(33, 2 * 256, device=CUDA).to(torch.bfloat16)
    scale = torch.tensor([0.5], device=CUDA)
    torch.library.opcheck(torch.ops.fused_quant.act_quant_token.default,
                          (x, "silu_and_mul", "int8_dynamic_token", True, "e4m3fn", "triton"))
    torch.library.opcheck(torch.ops.fused_quant.act_quant_static.default,
                          (x, scale, "silu_and_mul", "int8_static_tensor", True, "e4m3fn", "triton"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", ["fp8_static_tensor", "int8_static_tensor"])
@pytest.mark.parametrize("act", ["relu2", "identity"])
def test_flat_static_kernel_default_heuristics(backend, key_name, act):
    """From M = 257 contiguous relu2/identity rows go through the flat kernel: every bf16
    pattern (as 257 rows with a tail) plus random rows, and strided rows (tile fallback)."""
    key = K.KEYS[key_name]
    assert heuristics.static_launch(257, 1024, "sm_90", act).get("flat") == 1
    patterns = all_bf16_patterns()
    x = torch.cat([patterns, torch.randn(257 * 256 - 65536 + 7).to(torch.bfloat16)])[: 257 * 256]
    _check(backend, act, x.reshape(257, 256).to(CUDA), key)
    big = torch.randn(400, 2 * 1000, device=CUDA).to(torch.bfloat16)
    _check(backend, act, big[:, :1000], key)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name,key", KEYS)
def test_direct_launch_follows_specialization(backend, key_name, key):
    """After the first launch the compiled kernel is called directly; every change of what Triton
    specializes on (input alignment, M == 1, 16-divisible sizes, row stride) must get its own
    compiled kernel. Alternating shapes and offsets, each call bitwise against the reference."""
    base = (torch.randn(64 * 2048 + 8, device=CUDA) * 3).to(torch.bfloat16)
    cases = []
    for act in ("relu2", "silu_and_mul"):
        for m, width, offset in ((32, 1024, 0), (32, 1024, 1), (1, 1024, 0), (32, 1024, 0), (17, 1000, 3),
                                 (1, 1000, 1), (32, 1024, 8), (32, 1024, 1)):
            d_in = 2 * width if act == "silu_and_mul" else width
            cases.append((act, base[offset:offset + m * d_in].view(m, d_in)))
        # rows with a stride: every other row of a wider buffer (stride 2 * d_in)
        cases.append((act, base[: 32 * 2 * 1024].view(32, 2048)[:, :1024 if act == "relu2" else 2048][::2]))
    for act, x in cases * 2:
        _check(backend, act, x, key)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name,key", KEYS)
def test_validated_calls_launch_the_compiled_kernel_directly(backend, key_name, key, monkeypatch):
    """A call signature seen before skips the checks (none run) and launches its compiled kernel
    directly (no ``_launch``): fresh values each call, on the default and on a side stream, bitwise
    against the reference; an unaligned input of the same signature takes the generic launch and is
    right too."""
    from fused_quant.kernels import launch

    def rows(seed, offset=0):
        g = torch.Generator(device=CUDA).manual_seed(seed)
        base = (torch.randn(16 * 2048 + 8, generator=g, device=CUDA) * 3).to(torch.bfloat16)
        return base[offset:offset + 16 * 2048].view(16, 2048)

    for seed in range(2):  # checks, bind and Triton's JIT; then the compiled kernel is known
        _check(backend, "silu_and_mul", rows(seed), key)
    from fused_quant import registry

    generic, checks = [], []
    real = launch._launch
    monkeypatch.setattr(launch, "_launch", lambda plan, args: (generic.append(plan.variant), real(plan, args)))
    monkeypatch.setattr(registry, "check_activation_input", lambda x, act: checks.append(act))
    for seed in range(2, 5):
        _check(backend, "silu_and_mul", rows(seed), key)
    side = torch.cuda.Stream()
    x = rows(5)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        qa = fused_act_quant("silu_and_mul", x, key, _scale(key), backend=backend)
    side.synchronize()
    q, s = act_quant_ref("silu_and_mul", x, key, _scale(key), fp8_dtype=qa.data.dtype
                         if K.is_fp8(key) else torch.float8_e4m3fn)
    assert_bits_equal(qa.data, q, "side stream q")
    assert_bits_equal(qa.scale, s, "side stream scale")
    assert not generic, f"validated calls went through the generic launch: {generic}"
    _check(backend, "silu_and_mul", rows(6, offset=1), key)
    assert len(generic) == 1
    assert not checks, "a signature seen before must skip the checks"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", [K.kFp8DynamicTokenSym, K.kInt8DynamicTokenSym], ids=K.key_name)
def test_split_rows_under_graph_capture(backend, key, monkeypatch):
    """Per-token producers at decode sizes, captured into a CUDA graph: the H200's heuristics split each
    wide row over programs there (two launches) and replays are bitwise equal to the reference on fresh
    random rows and on every adversarial row (NaN, +-Inf, zeros, subnormals and max values); the eager
    call of the same signature launched no split kernel. One token more than the split's limit,
    and rows narrower than its minimum, are captured with the one-pass kernel."""
    from fused_quant.kernels import launch
    from fused_quant.platforms import current_platform
    from tests.helpers import adversarial_rows

    if current_platform().arch != "sm_90":
        pytest.skip(f"the split-rows rows are sm_90's; this GPU is {current_platform().arch}")
    max_m, min_d, _, _ = heuristics.config_for("sm_90").token_split
    real = launch._launch
    launched = []
    monkeypatch.setattr(launch, "_launch", lambda plan, args: (launched.append(plan.variant), real(plan, args))[1])
    cases = [(act, d, m, True) for act, d in (("silu_and_mul", 14336), ("relu2", 14336), ("identity", min_d),
                                              ("silu_and_mul", 11008)) for m in (1, 5, max_m)]
    cases += [("silu_and_mul", 14336, max_m + 1, False), ("identity", 4096, 1, False)]
    for act, d, m, split in cases:
        d_in = 2 * d if act == "silu_and_mul" else d
        bad = adversarial_rows(d_in, torch.bfloat16, CUDA)
        x = (torch.randn(m, d_in, device=CUDA) * 3).to(torch.bfloat16)
        launched.clear()
        _check(backend, act, x, key)  # eager: checks, bind, compile
        assert not any(v.startswith("split") for v in launched), (act, d, m, launched)  # (or direct: none)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        launched.clear()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            qa = fused_act_quant(act, x, key, backend=backend)
        assert (launched == ["split_absmax", "split"]) == split, (act, d, m, launched)
        # fresh random rows, then every adversarial row once (at M = 1 one per replay)
        fills = [(torch.randn(m, d_in, device=CUDA) * 7).to(torch.bfloat16)]
        order = torch.arange(-(-bad.shape[0] // m) * m, device=CUDA) % bad.shape[0]
        fills += [bad[i] for i in order.view(-1, m)]
        for trial, fill in enumerate(fills):
            x.copy_(fill)
            graph.replay()
            torch.cuda.synchronize()
            q, s = act_quant_ref(act, x, key, None, fp8_dtype=qa.data.dtype if K.is_fp8(key)
                                 else torch.float8_e4m3fn)
            assert_bits_equal(qa.data, q, f"{backend} {act} D={d} M={m} replay {trial} q")
            assert_bits_equal(qa.scale, s, f"{backend} {act} D={d} M={m} replay {trial} scale")
