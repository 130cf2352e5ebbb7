"""The small-M weight-streaming GEMM: its config table and predicate (CPU), its kernels' logic under
the Triton interpreter (CPU tensors, ``TRITON_INTERPRET=1``) and on the GPU against float64 (int8
bitwise against the torch backend's exact GEMM: an int32 accumulator and the same epilogue order),
split-K included, plus CUDA-graph capture (the split-K partials are summed in a fixed order)."""

from __future__ import annotations

import dataclasses
import json
import types

import pytest
import torch

from fused_quant.gemm import GemmProblem, dequant_epilogue
from fused_quant.kernels import gemm_launch as g
from tests.helpers import assert_bits_equal, assert_gemm_close, bit_patterns, capture_graph, int8_accumulator

FP8 = torch.float8_e4m3fn
# (M, N, K, config): odd N and K, K not a multiple of BLOCK_K, M = 1, more tokens than BLOCK_M, split-K
# (splits > K blocks is clamped), one K block
CASES = [
    (1, 33, 70, dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)),
    (5, 64, 256, dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=64, splits=2, num_warps=4, num_stages=2)),
    (17, 40, 100, dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=3, num_warps=4, num_stages=2)),
    (3, 16, 16, dict(BLOCK_N=16, BLOCK_M=16, BLOCK_K=32, splits=8, num_warps=4, num_stages=2)),
    # one-token blocks (no MMA): odd N and K with a K tail; several tokens, each its own block, split-K
    (1, 33, 70, dict(BLOCK_N=8, BLOCK_M=1, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)),
    (3, 40, 100, dict(BLOCK_N=16, BLOCK_M=1, BLOCK_K=32, splits=2, num_warps=4, num_stages=2)),
]


@pytest.fixture(autouse=True)
def _addresses_are_the_tensors(monkeypatch):
    """Every GEMM launch here: where a caller hands the direct launch its operands' addresses, they are
    its tensors' (in the kernel's order; ``None``: the launch reads them itself)."""
    call = g.KernelCall.__call__

    def checked(self, tensors, scalars, ptrs=None):
        assert ptrs is None or ptrs == tuple(t.data_ptr() for t in tensors), (ptrs, [t.data_ptr() for t in tensors])
        return call(self, tensors, scalars, ptrs)

    monkeypatch.setattr(g.KernelCall, "__call__", checked)


def _operands(kind, m, n, k, device, seed=0, adversarial=False):
    gen = torch.Generator().manual_seed(seed)
    if kind == "int8":
        xq = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
        w = torch.randint(-128, 128, (n, k), generator=gen, dtype=torch.int8)
        if adversarial:  # extremes of the int8 range: the largest products the accumulator sums
            xq[0] = -128
            w[0] = -128
            w[-1] = 127
    else:
        xq = (torch.randn(m, k, generator=gen) * 30).clamp(-448, 448).to(FP8)
        w = (torch.randn(n, k, generator=gen) * 30).clamp(-448, 448).to(FP8)
        if adversarial:  # max values, zeros and subnormals of e4m3fn
            xq[0] = torch.tensor(448.0).to(FP8)
            w[0, ::2] = torch.tensor(-448.0).to(FP8)
            w[-1] = torch.tensor(2.0 ** -9).to(FP8)
            xq[-1, 1::3] = 0
    xs = torch.rand(m, 1, generator=gen) * 0.02 + 1e-4
    ws = torch.rand(n, 1, generator=gen) * 0.02 + 1e-4
    if adversarial:  # scales of 0: a zero weight row's (its column is the bias), an all-zero token row's (int8)
        ws[n // 2] = 0
        if m > 1:  # one token keeps its scale: its extreme products stay in the output
            xs[-1] = 0
    return xq.to(device), xs.to(device), w.to(device), ws.to(device)


def _check(kind, m, n, k, cfg, device, out_dtype, bias, per_token, adversarial=False, seed=0):
    xq, xs, w, ws = _operands(kind, m, n, k, device, seed, adversarial)
    if out_dtype == torch.float16:  # keep the adversarial sums inside fp16's range (65504): no overflow to test
        xs = xs * 1e-3
    if not per_token:
        xs = xs[:1, :1].contiguous()
    b = (torch.randn(n, generator=torch.Generator().manual_seed(seed + 1)) * 3).to(out_dtype).to(device) if bias else None
    out = g.small_m_gemm(xq, xs, w, ws, b, out_dtype, config=cfg)
    assert out.shape == (m, n) and out.dtype == out_dtype
    what = f"small-M {kind} {m}x{n}x{k} {cfg} {out_dtype} bias={bias} per_token={per_token}"
    if kind == "int8":
        # int32 accumulation is exact and the epilogue's order is the spec's: the same bits as the reference
        ref = dequant_epilogue(int8_accumulator(xq, w), xs.cpu(), ws.cpu(),
                               None if b is None else b.cpu(), out_dtype)
        assert_bits_equal(out.cpu(), ref, what)
    assert_gemm_close(out, xq, xs.expand(m, 1) if not per_token else xs, w, ws, b, exact_acc=kind == "int8",
                      what=what)


# --- config table and predicate (CPU) ------------------------------------------------------------

def test_m_bucket_rounds_up_and_stops_at_the_last():
    assert ([g.m_bucket(m) for m in (1, 2, 3, 16, 17, 128, 129, 160, 161, 192, 193, 255, 256)]
            == [1, 2, 4, 16, 32, 128, 160, 160, 192, 192, 256, 256, 256])
    assert g.m_bucket(257) is None


def test_committed_table_has_every_bucket_of_each_swept_problem():
    """A bucket without its row sends its token counts to the torch providers: every (arch, kind, N, K) the
    table holds has a row at each of ``M_BUCKETS``, among the arch's rows and among each GPU model's own; every
    model with rows has its meta."""
    data = json.loads(g.SMALL_M_CONFIG_FILE.read_text())
    have: dict = {}
    for row in data["rows"]:
        have.setdefault((row["arch"], row.get("device"), row["kind"], row["n"], row["k"]), []).append(row["m"])
    assert have
    assert {key[1] for key in have} - {None} == set(data.get("models", {}))
    for problem, ms in have.items():
        assert sorted(ms) == list(g.M_BUCKETS), (problem, sorted(ms))


def test_retime_seeds_a_new_bucket_with_the_named_ones_config():
    from benchmarks.sweep_small_m_gemm import retime_configs

    base = dict(arch="sm_90", kind="int8", n=64, k=128, BLOCK_N=64, BLOCK_M=16, BLOCK_K=64, splits=1, num_warps=4,
                num_stages=4)
    rows = [dict(base, m=128, BLOCK_M=128), dict(base, m=256, BLOCK_M=256), dict(base, m=192, BLOCK_M=64),
            dict(base, arch="sm_100", m=256, BLOCK_N=32)]
    plain = retime_configs(rows, [160, 192])
    assert sorted(key[-1] for key in plain if key[0] == "sm_90") == [128, 192, 256]  # nothing seeded: no 160
    seeded = retime_configs(rows, [160, 192], seed_from=128)  # not the largest M: the one named
    assert seeded[("sm_90", "int8", 64, 128, 160)]["BLOCK_M"] == 128  # the new bucket takes 128's config
    assert seeded[("sm_90", "int8", 64, 128, 192)]["BLOCK_M"] == 64  # an installed row keeps its own
    assert ("sm_100", "int8", 64, 128, 160) not in seeded  # that arch has no row at 128 to seed from
    assert retime_configs(rows, [160], seed_from=256)[("sm_100", "int8", 64, 128, 160)]["BLOCK_N"] == 32


MS_REFUSED = "--ms: expected token counts >= 1 separated by commas, each one of"


@pytest.mark.parametrize("argv,what", [(["--seed-from", "256"], "--seed-from goes with --retime"),
                                       (["--retime", "--seed-from", "100"], "--seed-from takes a token count"),
                                       (["--ms", "100"], MS_REFUSED),
                                       (["--ms", "1,x"], MS_REFUSED),
                                       (["--ms", "\uff11"], MS_REFUSED),
                                       (["--kinds", "fp16"], "--kinds takes fp8"),
                                       (["--shapes", "gate_up,lm_head"], "--shapes takes names of"),
                                       (["--replot", "log", "table", "--own-rows"], "takes no --install, --retime, "
                                        "--seed-from or --own-rows")])
def test_sweep_refuses_options_that_would_write_unread_rows(argv, what, tmp_path, capsys):
    from benchmarks.sweep_small_m_gemm import main

    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path), *argv])
    assert exc.value.code == 2 and what in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_sweep_takes_each_kind_shape_and_token_count_once():
    """A value given twice is swept once (a second time would only repeat the first's rows), in the order given."""
    from benchmarks.sweep_small_m_gemm import parse_args

    _, kinds, shapes, ms = parse_args(["--out", "x", "--kinds", "int8,fp8,int8", "--shapes", "down,qkv,down",
                                       "--ms", "16,1,16,256"])
    assert (kinds, shapes, ms) == (["int8", "fp8"], ["down", "qkv"], [16, 1, 256])


def test_sweep_tries_256_token_blocks_above_128_and_the_bench_times_every_bucket():
    from benchmarks.decode import GEMM_MS, _providers
    from benchmarks.sweep_small_m_gemm import candidates

    # bench gemm times the small-M GEMM wherever the table has a config, not only where it wins
    assert all(_providers(kind)["small_m"][1] is g.small_m_swept for kind in ("fp8", "int8"))

    assert [bm for bm, _ in candidates(1)] == [16, 1]  # one-token blocks at one token only
    assert [bm for bm, _ in candidates(2)] == [16]
    assert [bm for bm, _ in candidates(32)] == [32, 16]  # 16-token blocks side by side
    assert [bm for bm, _ in candidates(64)] == [64]
    assert [bm for bm, _ in candidates(128)] == [64, 128]
    assert [bm for bm, _ in candidates(160)] == [64, 128, 256]  # at most half of a 256 block empty
    assert GEMM_MS == g.M_BUCKETS


def test_committed_table_is_well_formed():
    data = json.loads(g.SMALL_M_CONFIG_FILE.read_text())
    assert data["rows"], "no rows"
    g.check_rows(data["rows"], "committed GEMM table")  # what the provider checks as it reads the table
    g.check_rows(json.loads(g.SMALL_M_QUANTIZING_FILE.read_text())["rows"], "committed quantizing table", timed=False)
    for row in data["rows"]:
        assert row["arch"] in data["metas"] or row["device"] in data["models"], row["arch"]
        assert row["kind"] in ("fp8", "int8") and row["m"] in g.M_BUCKETS
        for field in g.CONFIG_FIELDS:
            assert isinstance(row[field], int) and row[field] > 0, (field, row)
        # tl.dot's minimum tile (int8 and FP8 MMAs need K >= 32 on the GPU); a one-token block takes no MMA, at one
        # token only (swept there alone)
        if row["BLOCK_M"] == 1:
            assert row["m"] == 1 and row["splits"] == 1, row
        else:
            assert row["BLOCK_M"] >= 16 and row["BLOCK_N"] >= 16 and row["BLOCK_K"] >= 32
        assert row["us"] > 0 and row["torch_us"] > 0


def test_committed_configs_measured_within_the_float64_bound():
    """Each committed row records the error its config measured against float64 when it was swept
    (``rel_err``: fp32 out, max |out - ref| / (sum |x||w| * xs * ws)); the sweep refuses to keep a
    config outside ``error_bound``, and so does this table."""
    from benchmarks.sweep_small_m_gemm import error_bound

    data = json.loads(g.SMALL_M_CONFIG_FILE.read_text())
    for row in data["rows"]:
        bound = error_bound(row["kind"], row["k"])
        assert 0 <= row["rel_err"] <= bound, (row["kind"], row["shape"], row["m"], row["rel_err"], bound)
    assert error_bound("int8", 4096) < 1e-6 and error_bound("fp8", 14336) < 2e-3  # far below a lost K block


def test_the_nearest_shape_counts_k_and_a_tie_with_torch_goes_to_torch(tmp_path, monkeypatch):
    """Two swept shapes of one N, K = 4096 and 14336: a problem takes the row of its own K's side (the other row's
    config would stream another K); a row whose time only equals its torch peer's is not faster, so the chain
    keeps the torch provider there."""
    table = tmp_path / "t.json"
    base = dict(arch="sm_90", kind="int8", n=4096, BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1, num_warps=4,
                num_stages=4, torch="triton_int8", m=1, torch_us=20.0, torch_all={"triton_int8": 20.0})
    rows = [dict(base, k=4096, us=8.0), dict(base, k=14336, us=12.0, BLOCK_K=128, splits=4),
            dict(base, k=4096, m=16, us=20.0, torch_all={"triton_int8": 20.0})]
    table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": rows}))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    for k, splits in ((4096, 1), (6000, 1), (12288, 4), (14336, 4), (20000, 4)):
        cfg, why = g.small_m_config("sm_90", "int8", 4096, k, 1)
        assert why == "" and cfg["splits"] == splits, (k, cfg)
    cfg, why = g.small_m_config("sm_90", "int8", 4096, 4096, 16)
    assert cfg is None and "triton_int8 measured faster at M bucket 16" in why and "20.0 vs 20.0" in why


def test_config_is_taken_only_where_it_measured_faster(tmp_path, monkeypatch):
    table = tmp_path / "t.json"
    base = dict(arch="sm_90", kind="int8", n=4096, k=4096, BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1,
                num_warps=4, num_stages=4, torch="triton_int8")
    rows = [dict(base, m=1, us=8.0, torch_us=14.0, torch_all={"triton_int8": 14.0}),
            dict(base, m=16, us=15.0, torch_us=14.0, torch_all={"triton_int8": 14.0}),
            dict(base, m=64, us=10.0, torch_us=14.0, BLOCK_M=64, torch_all={"triton_int8": 14.0}),
            dict(base, n=28672, m=1, us=30.0, torch_us=40.0, BLOCK_N=128, torch_all={"triton_int8": 40.0}),
            dict(base, kind="fp8", m=4, us=9.0, torch_us=8.0, torch="scaled_mm_fp8 (tensor-wise)",
                 torch_all={"scaled_mm_fp8 (tensor-wise)": 8.0, "scaled_mm_fp8 (row-wise)": 12.0})]
    table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": rows}))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    cfg, why = g.small_m_config("sm_90", "int8", 4096, 4096, 1)
    assert cfg == {f: base[f] for f in g.CONFIG_FIELDS} and why == ""
    cfg, why = g.small_m_config("sm_90", "int8", 4096, 4096, 9)  # bucket 16: torch measured faster
    assert cfg is None and "measured faster" in why and "14.0 vs 15.0" in why
    cfg, _ = g.small_m_config("sm_90", "int8", 20000, 4096, 1)  # nearest swept shape: N = 28672
    assert cfg["BLOCK_N"] == 128
    # N = 28672 was swept at one token only: at 64 tokens the nearest shape swept there answers, not "none"
    for n in (28672, 20000):
        cfg, why = g.small_m_config("sm_90", "int8", n, 4096, 64)
        assert cfg == {f: dict(base, BLOCK_M=64)[f] for f in g.CONFIG_FIELDS} and why == ""
    cfg, why = g.small_m_config("sm_90", "int8", 4096, 4096, 2)
    assert cfg is None and "no int8 config swept at M bucket 2 on sm_90" in why
    # FP8: only the timings of the problem's torch peers count (a tensor-wise problem's, a per-token one's)
    cfg, why = g.small_m_config("sm_90", "fp8", 4096, 4096, 3, (g.SCALED_MM_TENSOR_WISE,))
    assert cfg is None and "scaled_mm_fp8 (tensor-wise) measured faster" in why
    cfg, why = g.small_m_config("sm_90", "fp8", 4096, 4096, 3, (g.SCALED_MM_ROW_WISE, g.SCALED_MM_FP32))
    assert cfg is not None and why == ""
    cfg, why = g.small_m_config("sm_100", "int8", 4096, 4096, 1)
    assert cfg is None and "no measured int8 small-M configs for sm_100" in why and "sweep_small_m_gemm" in why
    cfg, why = g.small_m_config("sm_90", "int8", 4096, 4096, 300)
    assert cfg is None and "above the small-M GEMM's largest bucket 256" in why


def test_predicate_declines_cpu_tensors():
    p = GemmProblem(1, 64, 64, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), True, True, False)
    assert g.small_m_supported(p) == (False, "needs a GPU tensor, got cpu")


def _fp8_table(tmp_path, monkeypatch, torch_all: dict, us: float = 30.0, ms=(16,)):
    """A table of FP8 rows (N = K = 4096, M buckets ``ms``) on sm_90, the arch the tests' GPU problems report."""
    table = tmp_path / f"t{len(list(tmp_path.iterdir()))}.json"  # a new path: the table is read once per path
    rows = [dict(arch="sm_90", kind="fp8", n=4096, k=4096, m=m, BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1,
                 num_warps=4, num_stages=4, us=us, torch=min(torch_all, key=torch_all.get),
                 torch_us=min(torch_all.values()), torch_all=torch_all) for m in ms]
    table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": rows}))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    monkeypatch.setattr(g, "_device_arch", lambda device: "sm_90")


def _fp8_problem(m, per_token=True, per_channel=True, out_dtype=torch.bfloat16, n=4096):
    return GemmProblem(m, n, 4096, "fp8", FP8, out_dtype, torch.device("cuda"), per_token, per_channel, False)


@pytest.mark.parametrize("fp32_us,want", [(9.0, g.SCALED_MM_FP32), (13.0, g.SCALED_MM_ROW_WISE)])
def test_scaled_mm_takes_the_way_the_table_measured_faster(tmp_path, monkeypatch, fp32_us, want):
    _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 12.0,
                                       g.SCALED_MM_FP32: fp32_us})
    assert g.scaled_mm_way(_fp8_problem(16)) == want
    assert g.scaled_mm_way(_fp8_problem(9, per_token=False)) == want  # a per-tensor activation, per-channel weight
    assert g.scaled_mm_way(_fp8_problem(12, n=5000)) == want  # the nearest swept shape
    # one scale each (a per-token scale of one token is one) whatever the table says
    assert g.scaled_mm_way(_fp8_problem(16, per_token=False, per_channel=False)) == g.SCALED_MM_TENSOR_WISE
    assert g.scaled_mm_way(_fp8_problem(1, per_channel=False)) == g.SCALED_MM_TENSOR_WISE
    # row-wise writes bf16 only
    for out_dtype in (torch.float16, torch.float32):
        assert g.scaled_mm_way(_fp8_problem(16, out_dtype=out_dtype)) == g.SCALED_MM_FP32
    # where the sweep measured neither way: above the last bucket, a bucket it lacks, another arch
    assert g.scaled_mm_way(_fp8_problem(300)) == g.SCALED_MM_ROW_WISE
    assert g.scaled_mm_way(_fp8_problem(2)) == g.SCALED_MM_ROW_WISE
    monkeypatch.setattr(g, "_device_arch", lambda device: "sm_100")
    assert g.scaled_mm_way(_fp8_problem(16)) == g.SCALED_MM_ROW_WISE


def test_small_m_config_counts_every_way_a_problem_can_take(tmp_path, monkeypatch):
    """The small-M GEMM competes with the ways ``torch._scaled_mm`` would run the problem (``torch_peers``):
    the tensor-wise time for one scale each (a per-token scale of one token is one), the row-wise and the fp32
    product's for bf16 output, only the fp32 product's for fp16 / fp32 output, which row-wise cannot write."""
    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1, num_warps=4, num_stages=4)
    _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 12.0,
                                       g.SCALED_MM_FP32: 9.5}, us=10.0)
    assert g.torch_peers(_fp8_problem(16)) == (g.SCALED_MM_ROW_WISE, g.SCALED_MM_FP32)
    assert g.small_m_config("sm_90", "fp8", 4096, 4096, 16, g.torch_peers(_fp8_problem(16))) == (
        None, f"{g.SCALED_MM_FP32} measured faster at M bucket 16 for N=4096 K=4096 (9.5 vs 10.0 us)")
    for p in (_fp8_problem(16, per_token=False, per_channel=False), _fp8_problem(1, per_channel=False)):
        assert g.torch_peers(p) == (g.SCALED_MM_TENSOR_WISE,)
    cfg_, why = g.small_m_config("sm_90", "fp8", 4096, 4096, 16, (g.SCALED_MM_TENSOR_WISE,))
    assert cfg_ is None and g.SCALED_MM_TENSOR_WISE in why and "8.0 vs 10.0" in why
    int8 = dataclasses.replace(_fp8_problem(16), kind="int8", x_dtype=torch.int8)
    assert g.torch_peers(int8) is None  # every int8 provider the sweep timed
    _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 9.0,
                                       g.SCALED_MM_FP32: 10.5}, us=10.0)
    assert g.small_m_config("sm_90", "fp8", 4096, 4096, 16, g.torch_peers(_fp8_problem(16)))[0] is None
    fp16 = _fp8_problem(16, out_dtype=torch.float16)
    assert g.torch_peers(fp16) == (g.SCALED_MM_FP32,)
    assert g.small_m_config("sm_90", "fp8", 4096, 4096, 16, g.torch_peers(fp16)) == (cfg, "")
    # and the provider's predicate asks with the problem's peers: bf16 out yields to row-wise, fp16 out does not;
    # one token with one weight scale yields to tensor-wise, with per-channel weights it does not
    assert not g.small_m_supported(_fp8_problem(16))[0]
    assert g.small_m_supported(fp16) == (True, "")
    _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 12.0,
                                       g.SCALED_MM_FP32: 10.5}, us=10.0, ms=(1,))
    assert not g.small_m_supported(_fp8_problem(1, per_channel=False))[0]
    assert g.small_m_supported(_fp8_problem(1)) == (True, "")
    # a row of an older sweep, without the fp32 way's time: nothing to yield to for fp16 output
    _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 9.0}, us=10.0)
    assert g.torch_time(json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"][0], (g.SCALED_MM_FP32,)) == (
        None, float("inf"))
    assert g.small_m_supported(fp16) == (True, "")
    assert not g.small_m_supported(_fp8_problem(16))[0]  # row-wise's time counts for bf16


def _int8_row_table(tmp_path, monkeypatch, ms=(160,)):
    """gate_up's int8 rows where the Triton int8 GEMM measured faster than the small-M GEMM and ``torch._int_mm``
    slower (the H200's at M = 160)."""
    table = tmp_path / f"int8_{len(list(tmp_path.iterdir()))}.json"
    rows = [dict(arch="sm_90", kind="int8", n=28672, k=4096, m=m, BLOCK_N=128, BLOCK_M=256, BLOCK_K=128, splits=1,
                 num_warps=8, num_stages=4, us=61.4, torch="triton_int8", torch_us=57.2,
                 torch_all={"int_mm_int8": 120.8, "triton_int8": 57.2}) for m in ms]
    table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": rows}))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    monkeypatch.setattr(g, "_device_arch", lambda device: "sm_90")


def _gate_up_int8(m):
    """gate_up's int8 problem at M tokens (per-token and per-channel scales, bf16 out) on a GPU."""
    return GemmProblem(m, 28672, 4096, "int8", torch.int8, torch.bfloat16, torch.device("cuda"), True, True, False)


def test_int8_small_m_yields_only_to_what_the_backends_chain_would_run_instead(tmp_path, monkeypatch):
    """An int8 row where the Triton int8 GEMM measured faster than the small-M GEMM and ``torch._int_mm``
    slower (gate_up at M = 160 on the H200): ``triton_fp8``'s chain, where the Triton GEMM comes next, runs
    it; ``hip_w8a8``'s, where ``torch._int_mm`` comes next, keeps the small-M GEMM. At M = 16 ``torch._int_mm``
    does not take the problem, so the Triton GEMM is hip_w8a8's next there too."""
    import fused_quant
    from fused_quant.gemm import select_gemm_provider

    _int8_row_table(tmp_path, monkeypatch, ms=(16, 160))
    fused_quant.reset()  # choices of earlier tables are not reused
    try:
        p = _gate_up_int8(160)
        assert g.torch_peers(p, "triton_fp8") == ("triton_int8",)
        assert g.torch_peers(p, "hip_w8a8") == ("int_mm_int8",)
        assert g.torch_peers(p) is None  # outside a chain: every provider timed
        assert select_gemm_provider(p, "triton_fp8")[0].name == "triton_int8"
        assert select_gemm_provider(p, "hip_w8a8")[0].name == "small_m_int8"
        p16 = dataclasses.replace(p, m=16)
        assert g.torch_peers(p16, "hip_w8a8") == ("triton_int8",)
        assert select_gemm_provider(p16, "hip_w8a8")[0].name == "triton_int8"
    finally:
        fused_quant.reset()


def test_int8_peers_outside_a_chain_without_the_small_m_gemm_check_no_provider(monkeypatch):
    """A chain without the small-M provider (disabled, or a user's chain reusing its predicate): every provider
    timed counts and no provider's predicate is asked (one reusing this predicate would ask itself forever)."""
    class Provider:
        name = "users_int8"

        def check(self, p):
            raise AssertionError("a provider was asked")

    monkeypatch.setattr(g, "gemm_providers", lambda backend, kind: [Provider()])
    p = _gate_up_int8(160)
    assert g.torch_peers(p, "triton_fp8") is None


# ids that are not backend markers: the test runs on CPU
@pytest.mark.parametrize("backend", ["triton_fp8", "hip_w8a8"], ids=["nvidia_chain", "rocm_chain"])
def test_small_m_runs_where_nothing_after_it_in_the_chain_takes_the_problem(tmp_path, monkeypatch, backend):
    """Where every provider after the small-M GEMM in the chain is disabled or declines the problem, the small-M
    GEMM is what the chain can run: it takes the problem though the sweep measured a disabled provider faster (it
    used to compare with every provider timed and leave the problem to no one), and the lookup after selection
    binds the row's config. FP8 alike: with ``torch._scaled_mm`` disabled, or for an N it cannot take."""
    import fused_quant
    from fused_quant.backends.hip_w8a8 import gemms as hip_gemms
    from fused_quant.gemm import select_gemm_provider

    if backend == "hip_w8a8":  # its FP8 providers ask the platform for FP8 GEMMs
        info = hip_gemms.current_platform()
        monkeypatch.setattr(hip_gemms, "current_platform", lambda: dataclasses.replace(info, has_fp8=True))
    _int8_row_table(tmp_path, monkeypatch)
    p = _gate_up_int8(160)
    seen = []
    monkeypatch.setattr(g, "SmallMCall", lambda p_, cfg, x_quant=None, y_quant=None: seen.append(cfg) or cfg)
    try:
        fused_quant.reset()
        assert select_gemm_provider(p, backend)[0].name == ("triton_int8" if backend == "triton_fp8" else "small_m_int8")
        monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "triton_int8,int_mm_int8")
        fused_quant.reset()
        assert g.torch_peers(p, backend) == ()
        assert select_gemm_provider(p, backend)[0].name == "small_m_int8"
        # after selection the row's config, though triton_int8's time beats it
        assert g._small_m_call(p) == dict(BLOCK_N=128, BLOCK_M=256, BLOCK_K=128, splits=1, num_warps=8, num_stages=4)
        assert seen and seen[-1]["BLOCK_M"] == 256

        _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 9.0,
                                           g.SCALED_MM_FP32: 9.5}, us=10.0)
        fp8, odd_n = _fp8_problem(16), _fp8_problem(16, n=4104)  # N = 4104: not a multiple of 16
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS")
        fused_quant.reset()
        assert g.torch_peers(fp8, backend) == (g.SCALED_MM_ROW_WISE, g.SCALED_MM_FP32)
        assert select_gemm_provider(fp8, backend)[0].name == "scaled_mm_fp8"
        assert g.torch_peers(odd_n, backend) == ()
        assert select_gemm_provider(odd_n, backend)[0].name == "small_m_fp8"
        monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "scaled_mm_fp8")
        fused_quant.reset()
        assert g.torch_peers(fp8, backend) == ()
        assert select_gemm_provider(fp8, backend)[0].name == "small_m_fp8"
    finally:
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS", raising=False)
        fused_quant.reset()


def test_small_m_predicate_asks_the_chain_only_where_the_table_has_a_row(tmp_path, monkeypatch):
    """No row (an M above the last bucket, an arch not swept): the predicate says so without asking the providers
    after it in the chain, whose predicates may cost."""
    _int8_row_table(tmp_path, monkeypatch)
    asked = []
    monkeypatch.setattr(g, "torch_peers", lambda p, backend=None: asked.append(p) or None)
    supported = g.small_m_supported_in("triton_fp8")
    p = _gate_up_int8(300)
    assert supported(p) == (False, f"M=300 is above the small-M GEMM's largest bucket {g.M_BUCKETS[-1]}")
    assert g.small_m_swept(p) == supported(p)
    monkeypatch.setattr(g, "_device_arch", lambda device: "sm_100")
    ok, why = supported(dataclasses.replace(p, m=160))
    assert not ok and "no measured int8 small-M configs for sm_100" in why
    assert asked == []
    monkeypatch.setattr(g, "_device_arch", lambda device: "sm_90")
    assert supported(dataclasses.replace(p, m=160)) == (
        False, "triton_int8 measured faster at M bucket 160 for N=28672 K=4096 (57.2 vs 61.4 us)")
    assert g.small_m_swept(dataclasses.replace(p, m=160)) == (True, "")  # what the benchmarks time it on
    assert len(asked) == 1


def test_a_later_provider_reusing_the_small_m_predicate_does_not_recurse(tmp_path, monkeypatch):
    """A user's provider after the small-M one in the chain whose predicate is the small-M predicate: with every
    provider between them disabled, asking for the peers asks it, which asks for the peers again. The inner ask
    answers as outside a chain (every provider timed), so the outer one gets an answer: the user's provider
    declines (the Triton int8 GEMM measured faster), nothing else takes the problem, the small-M GEMM does."""
    import fused_quant
    from fused_quant.gemm import register_gemm_provider, select_gemm_provider, unregister_gemm_provider

    _int8_row_table(tmp_path, monkeypatch)
    p = _gate_up_int8(160)
    register_gemm_provider("users_small_m", g.small_m_gemm, kind="int8", backends=("triton_fp8",),
                           supported=g.small_m_supported_in("triton_fp8"), first=False)
    try:
        monkeypatch.setenv("FUSED_QUANT_DISABLED_GEMMS", "triton_int8,int_mm_int8")
        fused_quant.reset()
        assert g.torch_peers(p, "triton_fp8") == ()
        assert select_gemm_provider(p, "triton_fp8")[0].name == "small_m_int8"
        assert not g._ASKING.keys  # nothing left marked as being asked
    finally:
        unregister_gemm_provider("users_small_m")
        monkeypatch.delenv("FUSED_QUANT_DISABLED_GEMMS", raising=False)
        fused_quant.reset()


def test_bind_scaled_mm_refuses_a_way_the_problem_cannot_take():
    w, ws = torch.zeros(4096, 4096, dtype=FP8), torch.ones(4096, 1)
    with pytest.raises(ValueError, match="in one of .*got 'column-wise'"):
        g.bind_scaled_mm(_fp8_problem(16), w, ws, None, "column-wise")
    with pytest.raises(ValueError, match=r"in one of scaled_mm_fp8 \(fp32 \+ epilogue\) \(.*got 'scaled_mm_fp8 \(row-wise\)'"):
        g.bind_scaled_mm(_fp8_problem(16, out_dtype=torch.float16), w, ws, None, g.SCALED_MM_ROW_WISE)


@pytest.mark.parametrize("per_token,per_channel,m,fp32_us,want", [
    (True, True, 16, 9.0, "fp32"), (True, True, 16, 13.0, "row"), (False, True, 16, 9.0, "fp32"),
    (False, True, 16, 13.0, "row"),
    (True, True, 1, 9.0, "row"),  # M = 1 with per-channel weights is row-wise / fp32, not tensor-wise (no M = 1 row)
    (False, False, 16, 9.0, "tensor"), (True, False, 1, 9.0, "tensor")])
def test_bound_scaled_mm_runs_the_way_it_chose(tmp_path, monkeypatch, per_token, per_channel, m, fp32_us, want):
    """What a bound call passes ``torch._scaled_mm`` (seen by a stand-in) for each way the table's times pick:
    scalar scales; ``[M, 1]`` and ``[1, N]`` row-wise scales (a per-tensor one expanded); unit scales and an fp32
    product, then one epilogue launch with the layer's scales and bias."""
    _fp8_table(tmp_path, monkeypatch, {g.SCALED_MM_TENSOR_WISE: 8.0, g.SCALED_MM_ROW_WISE: 12.0,
                                       g.SCALED_MM_FP32: fp32_us})
    n, k = 64, 32
    seen, epilogues = [], []

    def scaled_mm(a, b, scale_a, scale_b, out_dtype):
        seen.append((tuple(scale_a.shape), tuple(scale_b.shape), float(scale_a.flatten()[0]), out_dtype))
        return torch.zeros(a.shape[0], b.shape[1], dtype=out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm)
    monkeypatch.setattr(g, "_epilogue_call", lambda p, splits: lambda tensors, scalars: epilogues.append(
        ([tuple(t.shape) for t in tensors], scalars)))
    p = GemmProblem(m, n, k, "fp8", FP8, torch.bfloat16, torch.device("cpu"), per_token, per_channel, False)
    xs = torch.full((m, 1) if per_token else (1,), 0.5)
    ws = torch.full((n, 1) if per_channel else (1, 1), 0.25)
    g.bind_scaled_mm(p, torch.zeros(n, k, dtype=FP8), ws, None)(torch.zeros(m, k, dtype=FP8), xs)
    if want == "tensor":
        assert seen == [((), (), 0.5, torch.bfloat16)] and not epilogues
    elif want == "row":
        assert seen == [((m, 1), (1, n), 0.5, torch.bfloat16)] and not epilogues
    else:
        assert seen == [((), (), 1.0, torch.float32)]
        assert epilogues == [([(m, n), tuple(xs.shape), tuple(ws.shape), tuple(ws.shape), (m, n)], (m, n, 1, n))]


@pytest.mark.parametrize("inference", [False, True])
def test_row_wise_call_follows_a_one_element_weight_scale_written_in_place(monkeypatch, inference):
    """The row-wise way takes the weight scale as ``[1, N]``: a one-element scale is expanded into a copy, kept while
    the layer's scale keeps its version and made again after a write into it (each call for an inference tensor,
    which has no version). A call under capture makes its own, which the graph copies again at each replay: it
    never reads a kept one, which a later eager call may replace and free, nor keeps its own, filled only at
    replay."""
    seen = []

    def scaled_mm(a, b, scale_a, scale_b, out_dtype):
        seen.append((scale_b, float(scale_b[0, -1]), tuple(scale_b.shape)))
        return torch.zeros(a.shape[0], b.shape[1], dtype=out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm)
    monkeypatch.setattr(g, "capturing", lambda: False)
    p = GemmProblem(16, 64, 32, "fp8", FP8, torch.bfloat16, torch.device("cpu"), True, False, False)
    mode = torch.inference_mode if inference else torch.no_grad
    with mode():
        ws = torch.full((1, 1), 0.25)
    call = g.bind_scaled_mm(p, torch.zeros(64, 32, dtype=FP8), ws, None, g.SCALED_MM_ROW_WISE)
    xq, xs = torch.zeros(16, 32, dtype=FP8), torch.ones(16, 1)
    call(xq, xs), call(xq, xs)
    with mode():
        ws.fill_(0.5)  # the layer's scale written in place (a weight update)
    monkeypatch.setattr(g, "capturing", lambda: True)
    call(xq, xs)
    monkeypatch.setattr(g, "capturing", lambda: False)
    call(xq, xs), call(xq, xs)
    assert [value for _, value, _ in seen] == [0.25, 0.25, 0.5, 0.5, 0.5]
    assert all(shape == (1, 64) for _, _, shape in seen)
    copies = [t for t, _, _ in seen]
    assert (copies[0] is copies[1]) is not inference and copies[1] is not copies[2]
    assert copies[2] is not copies[3]  # the call under capture kept nothing
    assert (copies[3] is copies[4]) is not inference
    monkeypatch.setattr(g, "capturing", lambda: True)
    call(xq, xs)
    assert seen[-1][0] is not copies[4], "a captured call reads a kept copy, which a later call may free"


@pytest.mark.parametrize("bound_captured", [False, True])
def test_fp32_ways_unit_scale_is_filled_before_any_call_reads_it(monkeypatch, bound_captured):
    """The fp32 way's unit scale is the bound call's own. Bound outside capture, it is made then and every call
    passes that one. Bound under CUDA graph capture, where a tensor made then is filled only at replay, each
    captured call makes its own; the first call outside capture makes the one the call keeps after that."""
    seen = []

    def scaled_mm(a, b, scale_a, scale_b, out_dtype):
        assert scale_a is scale_b and float(scale_a) == 1.0 and out_dtype == torch.float32
        seen.append(scale_a)
        return torch.zeros(a.shape[0], b.shape[1], dtype=out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm)
    monkeypatch.setattr(g, "_epilogue_call", lambda p, splits: lambda tensors, scalars: None)
    p = GemmProblem(16, 64, 32, "fp8", FP8, torch.float16, torch.device("cpu"), True, True, False)
    monkeypatch.setattr(g, "capturing", lambda: bound_captured)
    call = g.bind_scaled_mm(p, torch.zeros(64, 32, dtype=FP8), torch.ones(64, 1), None, g.SCALED_MM_FP32)
    xq, xs = torch.zeros(16, 32, dtype=FP8), torch.ones(16, 1)
    if bound_captured:
        call(xq, xs), call(xq, xs)  # captured calls: each its own
        assert seen[0] is not seen[1]
    monkeypatch.setattr(g, "capturing", lambda: False)
    call(xq, xs), call(xq, xs)
    monkeypatch.setattr(g, "capturing", lambda: True)
    call(xq, xs)  # a capture after an eager call reads the kept one
    kept = seen[-3:]
    assert kept[0] is kept[1] is kept[2] and all(t is not kept[0] for t in seen[:-3])


def test_row_wise_calls_keep_a_scale_copy_per_stream(monkeypatch):
    """The row-wise way's expanded copy of a one-element weight scale is kept per stream, made on the stream that
    reads it: replaced or dropped, its memory goes back to that stream alone (the caching allocator hands it out
    again there), never while another stream's kernel may still read it."""
    seen, stream = [], [7]
    monkeypatch.setattr(torch, "_scaled_mm", lambda a, b, scale_a, scale_b, out_dtype: seen.append(scale_b) or
                        torch.zeros(a.shape[0], b.shape[1], dtype=out_dtype))
    monkeypatch.setattr(g, "capturing", lambda: False)
    monkeypatch.setattr(g.launch, "device_index", lambda device: 0)
    monkeypatch.setattr(g.dl, "raw_stream", lambda index: stream[0])
    p = GemmProblem(16, 64, 32, "fp8", FP8, torch.bfloat16, torch.device("cpu"), True, False, False)
    call = g.bind_scaled_mm(p, torch.zeros(64, 32, dtype=FP8), torch.full((1, 1), 0.25), None, g.SCALED_MM_ROW_WISE)
    xq, xs = torch.zeros(16, 32, dtype=FP8), torch.ones(16, 1)
    for s in (7, 8, 7, 8):
        stream[0] = s
        call(xq, xs)
    assert seen[0] is seen[2] and seen[1] is seen[3] and seen[0] is not seen[1]


def test_split_k_reduction_and_the_fp32_ways_epilogue_are_two_launches_of_one_problem():
    """The split-K reduction and the fp32 way's epilogue run one kernel, with SPLITS a runtime argument that Triton
    compiles in where it is 1: a ``KernelCall`` launches directly the kernel of its first scalars, so the two
    callers of one problem never share one (a reduction after the fp32 way summed split 0 alone)."""
    p = GemmProblem(16, 256, 4096, "fp8", FP8, torch.bfloat16, torch.device("cpu"), True, True, False)
    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=128, splits=4, num_warps=4, num_stages=2)
    reduce = g.SmallMCall(p, cfg).reduce
    assert reduce is g._epilogue_call(p, 4) and reduce is not g._epilogue_call(p, 1)
    assert g._epilogue_call(p, 1) is g._epilogue_call(p, 1)


def test_row_wise_scaled_mm_gets_contiguous_scales(monkeypatch):
    """``torch._scaled_mm``'s row-wise kernel refuses strided scales, which the checked entry takes (a column of a
    wider tensor): the row-wise way passes them contiguous, the same values."""
    n, k, m = 64, 32, 16
    seen = []

    def scaled_mm(a, b, scale_a, scale_b, out_dtype):
        if not (scale_a.is_contiguous() and scale_b.is_contiguous()):
            raise ValueError("Invalid scaling configuration: both should be contiguous")
        seen.append((scale_a.clone(), scale_b.clone()))
        return torch.zeros(a.shape[0], b.shape[1], dtype=out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm)
    xs_wide, ws_wide = torch.rand(m, 2) + 0.5, torch.rand(n, 2) + 0.5
    xs, ws = xs_wide[:, :1], ws_wide[:, 1:]  # [M, 1] and [N, 1] with a row stride of 2
    assert not xs.is_contiguous() and not ws.is_contiguous()
    p = GemmProblem(m, n, k, "fp8", FP8, torch.bfloat16, torch.device("cpu"), True, True, False)
    g.bind_scaled_mm(p, torch.zeros(n, k, dtype=FP8), ws, None, g.SCALED_MM_ROW_WISE)(torch.zeros(m, k, dtype=FP8), xs)
    (scale_a, scale_b), = seen
    assert torch.equal(scale_a, xs) and torch.equal(scale_b, ws.reshape(1, -1))


def _bits_or_nan(t: torch.Tensor) -> torch.Tensor:
    """Bit patterns with every NaN as one code (a cast's NaN payload is the converter's own)."""
    bits = bit_patterns(t).to(torch.int64)
    return torch.where(torch.isnan(t), torch.full_like(bits, -1), bits)


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("per_token,per_channel,bias", [(True, True, True), (False, True, False),
                                                         (True, False, False), (False, False, True)])
def test_interpreted_epilogue_kernel_is_dequant_epilogue(out_dtype, per_token, per_channel, bias):
    """The epilogue kernel over one split (``torch._scaled_mm``'s fp32 product to the output) gives the bits of
    ``gemm.dequant_epilogue``, the spec's epilogue order, of the accumulator summed from +0 as the kernel sums
    its partials (a -0.0 product comes out as +0.0), on random and adversarial accumulators: zeros of both
    signs, NaN, +-Inf, fp32 subnormals and maxima, products beyond the output's range."""
    m, n = 19, 70  # a partial tile of each kind
    gen = torch.Generator().manual_seed(m * n)
    acc = torch.randn(m, n, generator=gen) * 1e3
    acc[0, :8] = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e-42, 3.4e38, -3.4e38])
    acc[1] = 7e4  # beyond fp16's range once scaled by ~1
    xs = torch.rand(m, 1, generator=gen) + 0.5 if per_token else torch.tensor([[1.25]])
    ws = torch.rand(n, 1, generator=gen) + 0.5 if per_channel else torch.tensor([[0.75]])
    if per_token:
        xs[2] = 0.0
    b = (torch.randn(n, generator=gen) * 3).to(out_dtype) if bias else None
    p = GemmProblem(m, n, 64, "fp8", FP8, out_dtype, torch.device("cpu"), per_token, per_channel, bias)
    ws_arg, bias_arg = g._fixed_operands(ws, b)
    out = torch.empty(m, n, dtype=out_dtype)
    g._epilogue_call(p, 1)((acc, xs, ws_arg, bias_arg, out), (m, n, 1, n))
    want = dequant_epilogue(acc + 0.0, xs, ws, b, out_dtype)
    assert torch.equal(_bits_or_nan(out), _bits_or_nan(want)), (out_dtype, per_token, per_channel, bias)


# --- the kernels under the interpreter (CPU) -----------------------------------------------------

@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_interpreted_kernels_against_float64(kind, case):
    m, n, k, cfg = CASES[case]
    out_dtype, bias, per_token = [(torch.bfloat16, False, True), (torch.float16, True, True),
                                  (torch.float32, True, False), (torch.bfloat16, True, False)][case % 4]
    _check(kind, m, n, k, cfg, torch.device("cpu"), out_dtype, bias, per_token, adversarial=case % 4 == 1, seed=case)


STATIC_KEYS = ["fp8_static_tensor", "int8_static_tensor"]
QUANTIZING_KEYS = STATIC_KEYS + ["fp8_dynamic_token", "int8_dynamic_token"]  # every key the kernel quantizes
X_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def _float_input(m, k, x_dtype, device, seed, adversarial):
    """Float activations; adversarial: a zero row, a row with NaN, one with +-Inf, subnormals (the first
    rows, as many as M has), values far beyond the FP8 / int8 ranges and the dtype's max (the last row)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen) * 3
    if adversarial:
        info = torch.finfo(x_dtype)
        special = [torch.zeros(k), torch.full((k,), float("nan")), torch.full((k,), float("inf")),
                   torch.full((k,), info.tiny / 4)]
        special[2][1::2] = -float("inf")
        for i, row in enumerate(special[:m]):
            x[i] = row
            x[i, ::5] = torch.randn(len(x[i, ::5]), generator=gen)  # a normal part: NaN / Inf rows stay so
        x[-1, ::3] = info.max
        x[-1, 1::7] = 1e4
    return x.to(x_dtype).to(device)


def _check_quantizing(key_name, m, n, k, cfg, x_dtype, device, adversarial, seed, bias=True,
                      out_dtype=torch.bfloat16, scale_value=None, x=None):
    """The small-M GEMM quantizing float rows itself gives the bits of the GEMM of the identity
    producer's output (the spec, ``reference.quant_ref``), which is within the float64 bound. A
    per-token key's scales are the kernel's own (given None), the producer's per-token scales then.
    ``x``: the float input (default: ``_float_input``'s)."""
    from fused_quant import keys as K
    from fused_quant.reference import quant_ref

    key = K.KEYS[key_name]
    kind = "fp8" if K.is_fp8(key) else "int8"
    per_token = K.is_per_token(key)
    _, _, w, ws = _operands(kind, m, n, k, device, seed)
    x = _float_input(m, k, x_dtype, device, seed, adversarial) if x is None else x.to(device)
    scale = None if per_token else torch.tensor([scale_value or (0.02 if kind == "fp8" else 0.03)], device=device)
    if device.type == "cuda":  # the Triton producer the kernel stands in for
        from fused_quant.kernels import launch

        q, s = launch.launch_act_quant(x, "identity", key, scale, False, FP8)
        ref_q, ref_s = quant_ref(x.cpu(), key, None if scale is None else scale.cpu())
        assert_bits_equal(q.cpu(), ref_q, "producer vs the spec")
        assert_bits_equal(s.cpu(), ref_s, "producer's scales vs the spec")
    else:
        q, s = quant_ref(x, key, scale)
    xs = s.reshape(m, 1) if per_token else s.reshape(1, 1)
    b = (torch.randn(n, generator=torch.Generator().manual_seed(seed + 1)) * 3).to(out_dtype).to(device) if bias else None
    p = GemmProblem(m, n, k, kind, q.dtype, out_dtype, x.device, per_token, True, bias)
    fused = g.bind_small_m_quantizing(p, w, ws, b, (key_name, x_dtype), cfg)(x, scale)
    unfused = g.bind_small_m(p, w, ws, b, cfg)(q, xs)
    what = f"quantizing small-M {key_name} {x_dtype} {m}x{n}x{k} {cfg} adversarial={adversarial}"
    assert_bits_equal(fused, unfused, what)
    saved = g.capturing  # split-K as a captured call launches it: the main kernel stores the scales it derived
    g.capturing = lambda: True
    try:
        captured = g.bind_small_m_quantizing(p, w, ws, b, (key_name, x_dtype), cfg)(x, scale)
    finally:
        g.capturing = saved
    assert_bits_equal(captured, unfused, what + ", the captured plan")
    finite = torch.isfinite(x.float()).all(dim=1)  # the float64 oracle takes finite rows
    assert_gemm_close(unfused[finite], q[finite], xs.expand(m, 1)[finite], w, ws, b,
                      exact_acc=kind == "int8", what=what)


@pytest.mark.interpreter
@pytest.mark.parametrize("n,k,block_n,block_k,splits,lines", [
    (13, 300, 8, 128, 2, 4),  # rows past N; the last split is a K tail shorter than one line past its start
    (5, 640, 8, 128, 4, 2),  # 5 K blocks in 4 splits of 2: the last split's range is empty
    (3, 100, 4, 128, 1, 2),  # one partial K block: the second line is past K
])
def test_interpreted_prefetch_addresses_stay_in_each_programs_rows(n, k, block_n, block_k, splits, lines):
    """What the small-M kernel asks L2 for before its grid dependency wait, for each program (N block, K
    split): its rows (row 0 for rows past N) at the first lines of its own K range, and a line past that
    range or past K at its row's first element: never outside the weight. Read back through the
    addresses from a weight whose every element holds its own position (fp32: lines of 128 elements)."""
    from tests.kernels.prefetch_probe import probe

    w = torch.arange(n * k, dtype=torch.float32).reshape(n, k)
    n_blocks = -(-n // block_n)
    out = torch.full((splits * n_blocks * block_n, lines), -1.0)
    probe[(n_blocks, splits)](w, out, n, k, k, BLOCK_N=block_n, BLOCK_K=block_k, LINES=lines)
    k_blocks = -(-k // block_k)
    per_split = -(-k_blocks // splits)
    for s in range(splits):
        start, end = s * per_split * block_k, min((s * per_split + per_split) * block_k, k_blocks * block_k, k)
        for b in range(n_blocks):
            for i in range(block_n):
                row = b * block_n + i if b * block_n + i < n else 0
                for j in range(lines):
                    col = start + j * 128 if start + j * 128 < end else 0
                    got = out[(s * n_blocks + b) * block_n + i, j].item()
                    assert got == row * k + col, (s, b, i, j, got, row * k + col)


@pytest.mark.interpreter
@pytest.mark.parametrize("m,block_m", [(1, 16), (3, 16), (16, 16), (17, 16), (100, 128), (224, 256)])
def test_interpreted_token_lanes_past_m_read_distinct_rows_of_x(m, block_m):
    """The rows of x the small-M kernel's token lanes address (``_token_rows``, the kernel's one rule for
    them): each lane its own row, a lane past M row ``lane % M``, never outside x and not every such lane
    row 0 (that made M between the blocks' multiples up to 2.15x slower on the H200). Read back through
    the rows from an x whose every row holds its own index."""
    from tests.kernels.prefetch_probe import token_rows_probe

    blocks = -(-m // block_m)
    x = torch.arange(m, dtype=torch.float32)
    out = torch.full((blocks * block_m,), -1.0)
    token_rows_probe[(blocks,)](x, out, m, BLOCK_M=block_m)
    assert torch.equal(out, torch.arange(blocks * block_m, dtype=torch.float32) % m), (m, block_m, out)


@pytest.mark.interpreter
@pytest.mark.parametrize("m,n,k,cfg,grid", [
    (17, 40, 100, CASES[2][3], (2, 2, 3)),  # two token blocks: tokens first, the fused split-K's counters per tile
    (5, 64, 256, CASES[1][3], (2, 1, 2)),  # one token block: N blocks on axis 0, as before
    (200, 72, 4104, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=256, splits=2, num_warps=4, num_stages=3), (4, 2, 2)),
    (17, 130, 100, CASES[2][3], (2, 5, 3))])  # more N blocks than token blocks
def test_several_token_blocks_launch_the_programs_of_one_weight_tile_side_by_side(m, n, k, cfg, grid):
    """With several token blocks the grid holds them on axis 0 (``tokens_first``: the programs that read one
    weight tile launch next to each other, and the later ones find it in L2), else the N blocks; the fused split-K
    kernel keeps one counter per output tile either way (the interpreter runs one program at a time, each tile's
    splits in a row, so two tiles sharing a counter show only where an index falls outside the counters; the GPU
    split-K cases, with more N blocks than token blocks, run them at once). Results against float64 and the
    two-kernel call's bits."""
    p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), True, True, False)
    c = g.SmallMCall(p, cfg)
    first = grid[0] == -(-m // cfg["BLOCK_M"]) and grid[0] > 1
    assert c.main.plan.grid == grid and c.main.plan.kwargs["TOKENS_FIRST"] is first
    assert c.tiles == grid[0] * grid[1]
    if c.fused is not None:
        assert c.fused.plan.grid == grid and c.fused.plan.kwargs["TOKENS_FIRST"] is first
    _check("int8", m, n, k, cfg, torch.device("cpu"), torch.bfloat16, True, True, adversarial=True, seed=m)
    # a bound caller's eager calls: with split-K the fused kernel, whose last split per tile counts on its own
    # counter (twice: the counters must be back at 0), the bits of the two kernels' call
    xq, xs, w, ws = _operands("int8", m, n, k, torch.device("cpu"), seed=m)
    two_kernels = g.small_m_gemm(xq, xs, w, ws, None, torch.bfloat16, config=cfg)
    call = g.bind_small_m(p, w, ws, None, cfg)
    for _ in range(2):
        assert_bits_equal(call(xq, xs), two_kernels)


@pytest.mark.interpreter
def test_n_blocks_past_the_grids_second_axis_stay_on_axis_0():
    """Tokens go first only where the N blocks fit the grid's second axis (65535 on CUDA): N = 2^21 in 32-row
    blocks is 65536 of them, which axis 1 cannot hold, so they stay on axis 0 with the token blocks on axis 1."""
    assert g.tokens_first(2, g.GRID_YZ_MAX) and not g.tokens_first(2, g.GRID_YZ_MAX + 1)
    assert not g.tokens_first(1, 8)
    cfg = dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)
    p = GemmProblem(20, 1 << 21, 64, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), True, True, False)
    c = g.SmallMCall(p, cfg)
    assert c.main.plan.grid == (65536, 2, 1) and c.main.plan.kwargs["TOKENS_FIRST"] is False


def test_quantizer_of_takes_only_the_identity_producer_of_the_problem():
    """The GEMM stands in for a producer launch only where it computes that producer's values: the
    package's identity producer of a per-tensor key, its q dtype, shape and device, rows of K."""
    from fused_quant.kernels import launch

    cpu = torch.device("cpu")
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    p = GemmProblem(4, 32, 64, "fp8", FP8, torch.bfloat16, cpu, False, True, False)

    def bound(act="identity", key="fp8_static_tensor", xx=x, rows=None, device=cpu, config=None):
        return launch.BoundLaunch(act, key, xx.dtype, xx.shape, xx.shape[-1] if rows is None else rows, False, FP8,
                                  device, config)

    assert g.quantizer_of(bound(), p) == ("fp8_static_tensor", torch.bfloat16)
    assert g.quantizer_of(bound(act="relu2"), p) is None  # not the identity
    per_token = GemmProblem(4, 32, 64, "fp8", FP8, torch.bfloat16, cpu, True, True, False)
    assert g.quantizer_of(bound(key="fp8_dynamic_token"), per_token) == ("fp8_dynamic_token", torch.bfloat16)
    assert g.quantizer_of(bound(key="int8_dynamic_token"), per_token) is None  # int8 q for an FP8 GEMM
    assert g.quantizer_of(bound(key="fp8_dynamic_token"), p) is None  # the problem's scales are per tensor
    assert g.quantizer_of(bound(), per_token) is None  # and here per token
    assert g.quantizer_of(bound(key="int8_static_tensor"), p) is None  # int8 q for an FP8 GEMM
    assert g.quantizer_of(bound(device=torch.device("meta")), p) is None  # another device
    tuning = (("BLOCK_M", 1), ("BLOCK_N", 64), ("num_warps", 4))
    assert g.quantizer_of(bound(config=tuning), p) is None  # a tuning launch
    assert g.quantizer_of(bound(xx=torch.zeros(5, 64, dtype=torch.bfloat16)), p) is None  # another M
    assert g.quantizer_of(bound(rows=128), p) is None  # strided rows
    assert g.quantizer_of(lambda x, s: (x, s), p) is None  # a user's producer: its values are its own


DEVICES = [pytest.param("cpu", marks=pytest.mark.interpreter), pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("key_name", STATIC_KEYS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale_value", [1.37 * 2.0 ** -100, 2.0 ** -80, 2.0 ** 100, 1.9 * 2.0 ** 127])
def test_quantizing_kernel_at_extreme_scales(key_name, device, scale_value):
    """Scales near the ends of the range the fast int8 quotient is proven for and beyond it (where the
    kernel divides with ``div_rn``, as the producer does): the spec's bits, for the producer (on the GPU)
    and the GEMM quantizing its input. (The quotients of these inputs at such scales saturate or round to
    a few small values, where the fast quotient and ``div_rn`` agree; the next test tells them apart.)"""
    m, n, k, cfg = CASES[0]
    _check_quantizing(key_name, m, n, k, cfg, torch.bfloat16, torch.device(device), True, seed=3,
                      scale_value=scale_value)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")  # the reciprocal of 2^-130
@pytest.mark.parametrize("device", DEVICES)
def test_int8_static_divides_where_the_fast_quotient_is_not_proven(device):
    """A subnormal per-tensor scale (2^-130, below the fast int8 quotient's proven [2^-90, 2^126]; its
    reciprocal is Inf) and inputs that are multiples of it in [-130, 130] (and a zero), whose quotients
    round: the producer (on the GPU) and the GEMM quantizing its input divide with ``div_rn`` there and
    give the spec's bits, where the fast quotient would saturate every nonzero value. No bias: one would
    hide outputs of such a tiny scale."""
    m, n, k, cfg = CASES[0]
    scale = 2.0 ** -130
    u = torch.rand(m, k, generator=torch.Generator().manual_seed(5)) * 260 - 130
    u[:, 0] = 0.0
    _check_quantizing("int8_static_tensor", m, n, k, cfg, torch.bfloat16, torch.device(device), False, seed=3,
                      bias=False, scale_value=scale, x=(u * scale).to(torch.bfloat16))


def test_bound_layer_quantizes_in_its_gemm_in_eager_calls_and_where_the_gemm_says_under_capture(monkeypatch):
    """A bound plain-tensor call goes to the GEMM's own quantizing call, except under CUDA graph capture,
    where it runs the producer and then the GEMM unless the GEMM's quantizing call is the one for capture too."""
    from fused_quant import modules

    calls = []

    class Gemm:
        from_float = True
        float_captured = False

        def quantizing(self, x, scale):
            calls.append(("quantizing", x, scale))
            return "fused"

        def __call__(self, q, s):
            calls.append(("gemm", q, s))
            return "unfused"

    def quant(x, scale):
        calls.append(("producer", x, scale))
        return "q", scale

    bound = modules._BoundForward(0, modules._TENSOR, quant, None, Gemm(), None, (None, None, None, "scale"), None)
    monkeypatch.setattr(modules, "capturing", lambda: False)
    assert bound("x", None) == "fused" and calls == [("quantizing", "x", "scale")]
    calls.clear()
    monkeypatch.setattr(modules, "capturing", lambda: True)
    assert bound("x", None) == "unfused" and calls == [("producer", "x", "scale"), ("gemm", "q", "scale")]
    calls.clear()
    Gemm.float_captured = True  # the quantizing call costs the GPU less too: taken under capture as well
    assert bound("x", None) == "fused" and calls == [("quantizing", "x", "scale")]
    calls.clear()
    Gemm.from_float, Gemm.float_captured = None, False  # a provider without one: the producer and the GEMM always
    monkeypatch.setattr(modules, "capturing", lambda: False)
    assert bound("x", None) == "unfused" and calls == [("producer", "x", "scale"), ("gemm", "q", "scale")]


@pytest.mark.parametrize("key_name,m,splits,captured", [
    ("fp8_static_tensor", 1, 1, True), ("fp8_static_tensor", g.QUANTIZING_CAPTURED_MAX_M, 1, True),
    ("int8_static_tensor", 2, 1, True), ("fp8_static_tensor", g.QUANTIZING_CAPTURED_MAX_M + 1, 1, False),
    ("fp8_static_tensor", 1, 2, False), ("fp8_dynamic_token", 1, 1, False), ("int8_dynamic_token", 4, 1, False),
])
def test_quantizing_call_under_capture_only_for_per_tensor_keys_at_few_tokens(monkeypatch, key_name, m, splits,
                                                                             captured):
    """The small-M providers' quantizing call, bound for a layer's identity producer, says whether it is
    also the one for calls under CUDA graph capture (``under_capture``: per-tensor keys, a few tokens, one
    split), and ``BoundGemm`` reads that; a quantizing call without the attribute is for eager calls only."""
    pytest.importorskip("triton")
    from fused_quant import keys as K
    from fused_quant.gemm import BoundGemm
    from fused_quant.kernels import launch

    key = K.KEYS[key_name]
    kind, n, k = ("fp8" if K.is_fp8(key) else "int8"), 32, 64
    wdtype = FP8 if kind == "fp8" else torch.int8
    cfg = dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=splits, num_warps=4, num_stages=2)
    monkeypatch.setattr(g, "small_m_config", lambda *a, **kw: (dict(cfg), ""))
    x = torch.randn(m, k, dtype=torch.bfloat16)
    producer = launch.bind_rows(x, x, "identity", key_name, False, FP8, None)
    p = GemmProblem(m, n, k, kind, wdtype, torch.bfloat16, torch.device("cpu"), K.is_per_token(key), True, False)
    w, ws = torch.zeros(n, k, dtype=wdtype), torch.ones(n, 1)
    call = g.bind_small_m_from_producer(p, w, ws, None, producer)
    assert call is not None and call.under_capture is captured
    bound = BoundGemm(None, None, None, None, None, p, "layer", from_float=call)
    assert bound.float_captured is captured
    assert BoundGemm(None, None, None, None, None, p, "layer").float_captured is False  # no quantizing call
    plain = BoundGemm(None, None, None, None, None, p, "layer", from_float=lambda x, scale: x)
    assert plain.float_captured is False  # a provider's quantizing call that does not say


@pytest.mark.parametrize("kind,m,block_m,quantizes", [
    ("int8", 1, 16, True), ("int8", 16, 16, True), ("int8", 17, 16, False), ("int8", 32, 16, False),
    ("int8", 8, 32, False), ("int8", 32, 32, False), ("fp8", 1, 16, True), ("fp8", 16, 16, True),
    ("int8", 1, 1, True), ("fp8", 1, 1, False)])  # one-token blocks: int8 only (its sums exact in any order)
def test_a_table_row_quantizes_a_float_input_in_one_token_block_of_16(monkeypatch, kind, m, block_m, quantizes):
    """A table row whose token block is 16 wide at 17-32 tokens (two blocks side by side) leaves a float input to
    the producer: the quantizing kernel was measured in one token block only. So does an FP8 row of one-token
    blocks: its K lanes' fp32 sums may be added in another order than the plain kernel's."""
    pytest.importorskip("triton")
    from fused_quant.kernels import launch

    cfg = dict(BLOCK_N=32, BLOCK_M=block_m, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)
    assert g.quantizes_float_input(cfg, m, kind) is quantizes
    monkeypatch.setattr(g, "small_m_config", lambda *a, **kw: (dict(cfg), ""))
    key_name = f"{kind}_dynamic_token"
    x = torch.randn(m, 64, dtype=torch.bfloat16)
    producer = launch.bind_rows(x, x, "identity", key_name, False, FP8, None)
    q_dtype = torch.int8 if kind == "int8" else FP8
    p = GemmProblem(m, 32, 64, kind, q_dtype, torch.bfloat16, torch.device("cpu"), True, True, False)
    call = g.bind_small_m_from_producer(p, torch.zeros(32, 64, dtype=q_dtype), torch.ones(32, 1), None, producer)
    assert (call is not None) is quantizes


ONE_TOKEN_ROW = dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=32, splits=1, num_warps=1, num_stages=1)
MMA_ROW = dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)


@pytest.mark.parametrize("key_name,row_at_2,bound", [
    ("int8_dynamic_token", MMA_ROW, MMA_ROW),  # the 2-token row's MMA block: fewer programs sweep the row
    ("int8_dynamic_token", None, ONE_TOKEN_ROW),  # no 2-token row (torch measured faster there): the row's own
    ("int8_dynamic_token", dict(MMA_ROW, BLOCK_M=32), ONE_TOKEN_ROW),  # no block the kernel quantizes in
    ("int8_dynamic_token", ONE_TOKEN_ROW, ONE_TOKEN_ROW),
    ("int8_static_tensor", MMA_ROW, ONE_TOKEN_ROW)])  # a per-tensor key has no sweep: its row as is
def test_int8_per_token_quantizing_call_takes_the_2_token_row_for_a_one_token_row(monkeypatch, key_name, row_at_2,
                                                                                  bound):
    """``quantizing_config``: at one token an int8 per-token key's quantizing call runs in the table's 2-token MMA
    row instead of its one-token row (each program sweeps the token's row for its absmax; far fewer programs), where
    that row has one block of at most 16 tokens; other keys and rows keep the row they were bound for."""
    pytest.importorskip("triton")
    from fused_quant.kernels import launch

    rows = {1: ONE_TOKEN_ROW, 2: row_at_2}
    monkeypatch.setattr(g, "small_m_config", lambda arch, kind, n, k, m, peers=None, model=None: (
        None if rows[m] is None else dict(rows[m]), ""))
    configs = []
    real = g._small_m_call
    monkeypatch.setattr(g, "_small_m_call", lambda p, key, *rest: (configs.append(dict(key)), real(p, key, *rest))[1])
    x = torch.randn(1, 64, dtype=torch.bfloat16)
    per_token = key_name.endswith("token")
    producer = launch.bind_rows(x, x, "identity", key_name, False, FP8, None)
    p = GemmProblem(1, 32, 64, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), per_token, True, False)
    call = g.bind_small_m_from_producer(p, torch.zeros(32, 64, dtype=torch.int8), torch.ones(32, 1), None, producer)
    assert call is not None and configs == [bound]


def _quantizing_table(path, rows):
    """A quantizing table (``quantizing_calls --install``'s format) of ``rows`` = [(arch, kind, n, k, m, config)]."""
    path.write_text(json.dumps({"metas": {}, "rows": [dict(arch=a, kind=kind, shape="s", n=n, k=k, m=m, **cfg, us=1.0)
                                                      for a, kind, n, k, m, cfg in rows]}))
    return path


WIDE_ONE_TOKEN = dict(BLOCK_N=8, BLOCK_M=1, BLOCK_K=256, splits=1, num_warps=4, num_stages=1)


@pytest.mark.parametrize("kind,per_token,m,row,measured,want", [
    ("int8", True, 1, ONE_TOKEN_ROW, WIDE_ONE_TOKEN, WIDE_ONE_TOKEN),  # the measured config, not the 2-token row
    ("int8", True, 4, MMA_ROW, dict(MMA_ROW, BLOCK_N=64, splits=2), dict(MMA_ROW, BLOCK_N=64, splits=2)),
    ("int8", True, 2, MMA_ROW, WIDE_ONE_TOKEN, MMA_ROW),  # a one-token block cannot take 2 tokens: the row's own
    ("int8", True, 1, ONE_TOKEN_ROW, dict(MMA_ROW, BLOCK_M=32), MMA_ROW),  # nor a 32-token block: the 2-token rule
    ("int8", True, 1, ONE_TOKEN_ROW, None, MMA_ROW),  # no measured row on this arch: the 2-token rule
    ("int8", False, 1, ONE_TOKEN_ROW, WIDE_ONE_TOKEN, ONE_TOKEN_ROW),  # per-tensor: no sweep, the row as is
    ("fp8", True, 4, MMA_ROW, dict(MMA_ROW, BLOCK_N=64, splits=2), MMA_ROW)])  # FP8: other configs, other fp32 sums
def test_quantizing_config_takes_the_measured_int8_config(monkeypatch, tmp_path, kind, per_token, m, row, measured,
                                                          want):
    """``quantizing_config`` reads ``SMALL_M_QUANTIZING_FILE`` for an int8 per-token key (the nearest measured shape
    at M's bucket), where that config quantizes M tokens in one block; else the table's row, or at one token the
    2-token MMA row."""
    rows = {1: ONE_TOKEN_ROW, 2: MMA_ROW}
    monkeypatch.setattr(g, "small_m_config", lambda arch, kind, n, k, m, peers=None, model=None: (dict(rows[m]), ""))
    table = [] if measured is None else [("sm_90", kind, 4096, 4096, g.m_bucket(m), measured),
                                         ("sm_90", kind, 28672, 4096, g.m_bucket(m), ONE_TOKEN_ROW)]
    table.append(("sm_80", kind, 4096, 4096, g.m_bucket(m), dict(MMA_ROW, BLOCK_N=128)))  # another arch's: not read
    monkeypatch.setattr(g, "SMALL_M_QUANTIZING_FILE", _quantizing_table(tmp_path / "q.json", table))
    p = GemmProblem(m, 4000, 4100, kind, torch.int8 if kind == "int8" else FP8, torch.bfloat16, torch.device("cpu"),
                    per_token, True, False)
    assert g.quantizing_config(p, dict(row), "sm_90") == want


def test_the_installed_quantizing_table_quantizes_its_tokens_in_int8():
    """Each committed row of ``SMALL_M_QUANTIZING_FILE``: int8, an arch the GEMM table has, M a bucket of at most 16
    tokens that its config quantizes in one block, a config the small-M kernel takes."""
    data = json.loads(g.SMALL_M_QUANTIZING_FILE.read_text())
    assert data["rows"] and set(data["metas"]) == {r["arch"] for r in data["rows"]}
    archs = g.table_metas()
    for r in data["rows"]:
        cfg = {f: r[f] for f in g.CONFIG_FIELDS}
        assert r["kind"] == "int8" and r["arch"] in archs and r["m"] in g.M_BUCKETS and r["m"] <= 16, r
        assert g.quantizes_float_input(cfg, r["m"], "int8"), r
        assert all(type(v) is int and v >= 1 for v in cfg.values()), r
        assert r["row_us"] is None or r["us"] <= r["row_us"], r  # the fastest, the table row's call among those timed


@pytest.mark.parametrize("fitting,bound", [
    ((1, 16), [MMA_ROW]),  # the 2-token row's kernel fits a block's shared memory
    ((1,), [MMA_ROW, ONE_TOKEN_ROW]),  # it does not: the one-token row's, as bound before
    ((), [MMA_ROW, ONE_TOKEN_ROW, None])])  # neither: no quantizing call (the producer, then the GEMM)
def test_a_quantizing_call_whose_kernel_does_not_fit_shared_memory_gives_way(monkeypatch, fitting, bound):
    """The sweep compiled its rows for quantized tiles; a float tile takes 2-4 times their bytes per pipeline stage,
    and Triton refuses a kernel over a block's shared memory at its first launch. ``bind_small_m_from_producer``
    asks first (``KernelCall.fits``, on the eager call's operand dtypes) and takes the next config, or none."""
    pytest.importorskip("triton")
    from fused_quant.kernels import launch

    rows = {1: ONE_TOKEN_ROW, 2: MMA_ROW}
    monkeypatch.setattr(g, "small_m_config", lambda arch, kind, n, k, m, peers=None, model=None: (dict(rows[m]), ""))
    asked = []

    def fits(self, dtypes, scalars):
        asked.append((self.plan.kwargs["BLOCK_M"], dtypes))
        return self.plan.kwargs["BLOCK_M"] in fitting

    monkeypatch.setattr(g.KernelCall, "fits", fits)
    x = torch.randn(1, 64, dtype=torch.float32)
    producer = launch.bind_rows(x, x, "identity", "int8_dynamic_token", False, FP8, None)
    p = GemmProblem(1, 32, 64, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), True, True, False)
    call = g.bind_small_m_from_producer(p, torch.zeros(32, 64, dtype=torch.int8), torch.ones(32, 1), None, producer)
    assert [block_m for block_m, _ in asked] == [r["BLOCK_M"] for r in bound if r is not None]
    # the eager call's operands: fp32 rows, int8 weight, the weight scale standing in for the scales it works out
    assert {dtypes for _, dtypes in asked} == {(torch.float32, torch.int8, torch.float32, torch.float32, torch.float32,
                                                torch.bfloat16, torch.bfloat16, torch.float32, torch.float32)}
    assert (call is None) is (bound[-1] is None)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("device,m,n,k", [
    pytest.param("cpu", 1, 33, 70, marks=pytest.mark.interpreter),
    pytest.param("cuda", 1, 28672, 4096, marks=pytest.mark.gpu)])
@pytest.mark.parametrize("adversarial", [False, True])
def test_int8_per_token_quantizing_call_in_an_mma_row_has_the_one_token_rows_bits(device, m, n, k, adversarial):
    """What ``quantizing_config`` relies on: at one token the int8 per-token quantizing call in an MMA row gives the
    bits of the producer then the plain GEMM in the one-token row (integer sums are exact in any order)."""
    from fused_quant import keys as K
    from fused_quant.reference import quant_ref

    dev = torch.device(device)
    _, _, w, ws = _operands("int8", m, n, k, dev, seed=n)
    x = _float_input(m, k, torch.bfloat16, dev, seed=k, adversarial=adversarial)
    q, s = quant_ref(x.cpu(), K.kInt8DynamicTokenSym, None)
    q, xs = q.to(dev), s.reshape(m, 1).to(dev)
    # the operands' device: a problem's device has its index (``_problem_of``), which the launches are keyed on
    p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, w.device, True, True, False)
    one_token = dict(ONE_TOKEN_ROW, BLOCK_K=32 if device == "cpu" else 512)
    mma = dict(MMA_ROW) if device == "cpu" else dict(BLOCK_N=256, BLOCK_M=16, BLOCK_K=128, splits=1, num_warps=8,
                                                      num_stages=4)
    fused = g.bind_small_m_quantizing(p, w, ws, None, ("int8_dynamic_token", torch.bfloat16), mma)(x, None)
    unfused = g.bind_small_m(p, w, ws, None, one_token)(q, xs)
    assert_bits_equal(fused, unfused, f"int8 per-token {m}x{n}x{k}: quantizing in {mma} vs {one_token}")


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("key_name,m,n,k", [  # Llama-3-8B's linears
    ("int8_dynamic_token", 1, 6144, 4096), ("int8_dynamic_token", 1, 4096, 4096),  # quantizing_config's rows
    ("int8_dynamic_token", 1, 28672, 4096), ("int8_dynamic_token", 1, 4096, 14336),
    # rows of 64 weight rows x 16 tokens x 512 K in 4 stages (Triton compiling for sm_90: 237568 bytes with fp32 rows)
    ("int8_static_tensor", 2, 4096, 4096), ("int8_dynamic_token", 4, 4096, 14336),
    ("fp8_dynamic_token", 16, 4096, 14336), ("fp8_static_tensor", 16, 4096, 14336)])
@pytest.mark.parametrize("adversarial", [False, True])
def test_a_quantizing_call_from_the_table_fits_and_has_the_producers_bits(key_name, m, n, k, x_dtype, adversarial):
    """The table's quantizing call for float rows of each dtype: it binds where its kernel fits a block's shared
    memory (``KernelCall.fits``), else the next config or none, and gives the bits of the producer then the plain
    GEMM. A config ``fits`` turns down is refused at its launch: the check reads what Triton enforces."""
    import triton

    from fused_quant import keys as K
    from fused_quant.kernels import launch

    key = K.KEYS[key_name]
    kind, per_token = ("fp8" if K.is_fp8(key) else "int8"), K.is_per_token(key)
    _, _, w, ws = _operands(kind, m, n, k, torch.device("cuda"), seed=n)
    x = _float_input(m, k, x_dtype, w.device, seed=k, adversarial=adversarial)
    scale = None if per_token else torch.tensor([0.02 if kind == "fp8" else 0.03], device=w.device)
    producer = launch.bind_rows(x, x, "identity", key_name, False, FP8, None)
    p = GemmProblem(m, n, k, kind, w.dtype, torch.bfloat16, w.device, per_token, True, False)
    call = g.bind_small_m_from_producer(p, w, ws, None, producer)
    q, xs = producer(x, scale)
    want = g.bind_small_m(p, w, ws, None)(q, xs)
    arch = g._device_arch(w.device)
    row = g.small_m_config(arch, kind, n, k, m, (), g._device_model(w.device))[0]
    assert row is not None and g.quantizes_float_input(row, m, kind)
    picked = g.quantizing_config(p, row, arch)
    tried = g.bind_small_m_quantizing(p, w, ws, None, (key_name, x_dtype), picked)
    fits = tried.fits(x_dtype)
    what = f"{key_name} {m}x{n}x{k} from {x_dtype} adversarial={adversarial}"
    if fits:
        assert_bits_equal(tried(x, scale), want, f"{what} in {picked}")
    else:
        with pytest.raises(triton.runtime.errors.OutOfResources, match="shared memory"):
            tried(x, scale)
    assert (call is None) is (not fits and picked is row)  # the table's own row after quantizing_config's, else none
    if call is not None:
        assert_bits_equal(call(x, scale), want, what)


@pytest.mark.parametrize("key_name,per_token,kind", [
    ("fp8_dynamic_token", False, "fp8"),  # per-token scales the kernel would store for a per-tensor problem
    ("fp8_static_tensor", True, "fp8"),
    ("int8_dynamic_token", True, "fp8"),  # int8 q for an FP8 GEMM
])
def test_quantizing_kernel_refuses_a_key_that_is_not_the_problems(key_name, per_token, kind):
    p = GemmProblem(4, 32, 64, kind, FP8, torch.bfloat16, torch.device("cpu"), per_token, True, False)
    w, ws = torch.zeros(32, 64, dtype=FP8), torch.ones(32, 1)
    cfg = dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=2, num_warps=4, num_stages=2)
    with pytest.raises(ValueError, match=f"got key {key_name}"):
        g.bind_small_m_quantizing(p, w, ws, None, (key_name, torch.bfloat16), cfg)


@pytest.mark.parametrize("m,block_m,match", [
    (64, 64, "at most 16 tokens, the config has BLOCK_M=64"),  # wider token blocks
    (1, 1, "fp8 float tiles in MMA token blocks only .* the config has BLOCK_M=1"),  # FP8 one-token blocks
])
def test_quantizing_kernel_refuses_token_blocks_it_does_not_quantize_in(m, block_m, match):
    p = GemmProblem(m, 32, 64, "fp8", FP8, torch.bfloat16, torch.device("cpu"), False, True, False)
    w, ws = torch.zeros(32, 64, dtype=FP8), torch.ones(32, 1)
    cfg = dict(BLOCK_N=32, BLOCK_M=block_m, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)
    with pytest.raises(ValueError, match=match):
        g.bind_small_m_quantizing(p, w, ws, None, ("fp8_static_tensor", torch.bfloat16), cfg)


# --- the GPU ------------------------------------------------------------------------------------

GPU_CASES = CASES + [
    (16, 4096, 4096, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1, num_warps=4, num_stages=6)),
    (1, 4096, 14336, dict(BLOCK_N=128, BLOCK_M=16, BLOCK_K=256, splits=4, num_warps=8, num_stages=4)),
    (64, 1000, 1000, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=128, splits=4, num_warps=4, num_stages=4)),
    (200, 72, 4104, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=256, splits=2, num_warps=4, num_stages=3)),
    # token blocks of 128 and 256 (the table's picks at M = 128 / 256), a partial last block of each
    (250, 300, 4100, dict(BLOCK_N=128, BLOCK_M=256, BLOCK_K=128, splits=1, num_warps=8, num_stages=3)),
    (130, 200, 1000, dict(BLOCK_N=64, BLOCK_M=128, BLOCK_K=128, splits=2, num_warps=4, num_stages=4)),
    (256, 300, 4100, dict(BLOCK_N=128, BLOCK_M=256, BLOCK_K=128, splits=1, num_warps=8, num_stages=4)),
    (129, 200, 1000, dict(BLOCK_N=64, BLOCK_M=128, BLOCK_K=256, splits=2, num_warps=4, num_stages=4)),
    # the twenty-sixth round's rows at 32 / 64 tokens (16-token blocks side by side at 32), partial last blocks
    (30, 4100, 4096, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1, num_warps=4, num_stages=6)),
    (64, 1000, 4104, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=128, splits=4, num_warps=4, num_stages=6)),
    (20, 1000, 4104, dict(BLOCK_N=64, BLOCK_M=32, BLOCK_K=256, splits=4, num_warps=4, num_stages=4)),
    (50, 4100, 4096, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=256, splits=2, num_warps=4, num_stages=4)),
    (31, 1000, 14400, dict(BLOCK_N=64, BLOCK_M=32, BLOCK_K=512, splits=2, num_warps=4, num_stages=3)),
    (64, 6000, 4096, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=256, splits=1, num_warps=4, num_stages=4)),
    (32, 6000, 4100, dict(BLOCK_N=64, BLOCK_M=32, BLOCK_K=512, splits=1, num_warps=4, num_stages=3)),
    # the twenty-seventh round's int8 rows: down at 64 tokens, qkv at 32 and 64; K not a multiple of the block
    (57, 4100, 14400, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=256, splits=2, num_warps=4, num_stages=5)),
    (27, 6100, 4100, dict(BLOCK_N=64, BLOCK_M=32, BLOCK_K=256, splits=1, num_warps=4, num_stages=5)),
    (64, 6000, 4100, dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=128, splits=1, num_warps=4, num_stages=8)),
    # one-token blocks (no MMA) at down's and qkv's sizes: N and K not multiples of the block, tokens side by side
    (1, 4100, 14400, dict(BLOCK_N=16, BLOCK_M=1, BLOCK_K=512, splits=1, num_warps=4, num_stages=3)),
    (4, 6000, 4100, dict(BLOCK_N=32, BLOCK_M=1, BLOCK_K=256, splits=2, num_warps=4, num_stages=3)),
    # the twenty-eighth round's one-token rows of qkv, o and down: N odd, K not a multiple of the block
    (1, 4099, 4100, dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=1024, splits=1, num_warps=1, num_stages=1)),
    (1, 4099, 14400, dict(BLOCK_N=1, BLOCK_M=1, BLOCK_K=1024, splits=1, num_warps=1, num_stages=1)),
    (1, 6099, 4100, dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=512, splits=1, num_warps=1, num_stages=1)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("case", range(len(GPU_CASES)), ids=lambda i: f"case{i}")
@pytest.mark.parametrize("out_dtype,bias,per_token", [(torch.bfloat16, False, True), (torch.float16, True, True),
                                                      (torch.bfloat16, True, False), (torch.float32, False, True)])
def test_gpu_kernels_against_float64(kind, case, out_dtype, bias, per_token):
    m, n, k, cfg = GPU_CASES[case]
    _check(kind, m, n, k, cfg, torch.device("cuda"), out_dtype, bias, per_token, adversarial=case % 2 == 0, seed=case)


# (device, case): the interpreter's small cases on the CPU, on the GPU every case with 16-token blocks
QUANTIZING_CASES = ([pytest.param("cpu", c, marks=pytest.mark.interpreter) for c in CASES]
                    + [pytest.param("cuda", c, marks=pytest.mark.gpu) for c in GPU_CASES
                       if c[3]["BLOCK_M"] <= g.QUANTIZING_MAX_BLOCK_M])


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("key_name", QUANTIZING_KEYS)
@pytest.mark.parametrize("device,case", QUANTIZING_CASES)
@pytest.mark.parametrize("adversarial", [False, True])
def test_quantizing_kernel_is_the_producer_then_the_gemm(key_name, device, case, adversarial):
    m, n, k, cfg = case
    from fused_quant import keys as K

    key = K.KEYS[key_name]
    if K.is_fp8(key) and cfg["BLOCK_M"] == 1:  # FP8 one-token blocks: the quantizing call is refused
        p = GemmProblem(m, n, k, "fp8", FP8, torch.bfloat16, torch.device(device), K.is_per_token(key), True, False)
        with pytest.raises(ValueError, match="MMA token blocks only"):
            g.bind_small_m_quantizing(p, None, None, None, (key_name, torch.bfloat16), cfg)
        return
    _check_quantizing(key_name, m, n, k, cfg, X_DTYPES[(m + k) % 3], torch.device(device), adversarial, seed=n,
                      bias=n % 3 != 1, out_dtype=(torch.bfloat16, torch.float16)[(m + n) % 2])


@pytest.mark.parametrize("cfg,k,width", [
    (dict(BLOCK_N=256, BLOCK_M=16, BLOCK_K=128, num_warps=8), 4096, 1024),  # gate_up's 2-token row: 4 steps, not 32
    (dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, num_warps=4), 4096, 512),
    (dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=512, num_warps=1), 14336, 2048),
    (dict(BLOCK_N=64, BLOCK_M=64, BLOCK_K=256, num_warps=4), 4096, 256),  # never narrower than BLOCK_K
    (dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, num_warps=4), 100, 128),  # K's next power of two
    (dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=128, num_warps=4), 70, 128)])
def test_sweep_width_is_64_floats_a_thread_within_block_k_and_k(cfg, k, width):
    """A per-token quantizing call sweeps its tokens' rows for their absmax in ``[BLOCK_M, sweep_width]`` tiles:
    64 floats a thread, no narrower than BLOCK_K, no wider than K's next power of two; the launch passes it on
    (``SWEEP_K``), and a per-tensor key, which has no sweep, its BLOCK_K."""
    pytest.importorskip("triton")
    assert g.sweep_width(cfg, k) == width
    cfg = dict(cfg, splits=1, num_stages=2)
    for per_token, key_name, want in ((True, "int8_dynamic_token", width), (False, "int8_static_tensor", None)):
        p = GemmProblem(16, 64, k, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), per_token, True, False)
        kwargs = g.SmallMCall(p, cfg, (key_name, torch.bfloat16)).main.plan.kwargs
        assert kwargs["SWEEP_K"] == (want or cfg["BLOCK_K"])


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("key_name", ["int8_dynamic_token", "fp8_dynamic_token"])
@pytest.mark.parametrize("x_dtype", X_DTYPES)
def test_interpreted_absmax_sweep_over_several_tiles_and_a_tail(key_name, x_dtype):
    """The sweep over K = 1100 in three 512-wide tiles, the last a tail of 76: each row's absmax sits in another
    tile (a NaN in the tail only, -Inf in the first, the dtype's max in the second, a subnormal row); the call
    has the bits of the producer then the GEMM."""
    cfg = dict(BLOCK_N=16, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)
    m, n, k = 5, 24, 1100
    assert g.sweep_width(cfg, k) == 512
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(7))
    x[0, 1090] = float("nan")
    x[1, 3] = -float("inf")
    x[2, 700] = torch.finfo(x_dtype).max
    x[3] = torch.finfo(x_dtype).tiny / 8
    x[4, 1099] = -50.0
    _check_quantizing(key_name, m, n, k, cfg, x_dtype, torch.device("cpu"), False, seed=11, x=x.to(x_dtype))


def _splits(case) -> int:
    """The splits a case runs with (no more than its K blocks)."""
    return min(case[3]["splits"], -(-case[2] // case[3]["BLOCK_K"]))


# split-K cases: the interpreter's small ones, and on the GPU the larger ones
SPLIT_CASES = ([pytest.param("cpu", c, marks=pytest.mark.interpreter) for c in CASES if _splits(c) > 1]
               + [pytest.param("cuda", c, marks=pytest.mark.gpu) for c in GPU_CASES
                  if _splits(c) > 1 and c[1] >= 200])


@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("device,case", SPLIT_CASES)
@pytest.mark.parametrize("out_dtype,bias,per_token", [(torch.bfloat16, True, True), (torch.float16, False, False),
                                                      (torch.float32, True, False)])
def test_eager_split_k_is_one_launch_with_the_epilogue_kernels_bits(monkeypatch, kind, device, case, out_dtype,
                                                                    bias, per_token):
    """Split-K in an eager call: the last split of each tile sums the partials in the main kernel (one
    launch), with the bits of the main kernel then the epilogue kernel that a captured call and an
    unbound call launch (the same sum in the same order), call after call of one bound call (its
    counters are back at 0 after each: a count left over would leave the tiles unreduced, and the
    output uninitialized memory)."""
    m, n, k, cfg = case
    inputs = [_operands(kind, m, n, k, torch.device(device), seed) for seed in range(3)]
    if not per_token:
        inputs = [(xq, xs[:1].clone(), w, ws) for xq, xs, w, ws in inputs]
    _, _, w, ws = inputs[0]
    b = (torch.randn(n, generator=torch.Generator().manual_seed(7)) * 3).to(out_dtype).to(w.device) if bias else None
    p = g._problem_of(*inputs[0][:2], w, ws, b, out_dtype)  # the problem small_m_gemm's call works out
    c = g._small_m_call(p, g._config_key(cfg))
    launched = []
    for name in ("main", "reduce", "fused"):
        kernel = getattr(c, name)
        monkeypatch.setattr(c, name, lambda tensors, scalars, ptrs=None, kernel=kernel, name=name: (
            launched.append(name), kernel(tensors, scalars, ptrs)))
    outs = {}
    # the two-kernel paths first (captured, and an unbound call): the fused one must not lean on their output
    for path in ("captured", "unbound", "eager"):
        monkeypatch.setattr(g, "capturing", lambda path=path: path == "captured")
        call = g.bind_small_m(p, w, ws, b, cfg)
        outs[path] = []
        for xq, xs, _, _ in inputs:
            launched.clear()
            out = g.small_m_gemm(xq, xs, w, ws, b, out_dtype, cfg) if path == "unbound" else call(xq, xs)
            outs[path].append(out.clone())
            assert launched == (["fused"] if path == "eager" else ["main", "reduce"]), path
    for path in ("captured", "unbound"):
        for i, (one, two) in enumerate(zip(outs["eager"], outs[path])):
            assert_bits_equal(one, two, f"{kind} {m}x{n}x{k} {cfg} {out_dtype} bias={bias} per_token={per_token} "
                                        f"call {i}, eager vs {path}")


@pytest.mark.interpreter
def test_split_k_counters_are_per_stream_and_back_at_zero_after_each_call(monkeypatch):
    """A bound call's one-launch plan keeps one set of tile counters per stream (the stream its caller
    launches on: here a stand-in, the interpreter has none), each back at 0 after every call."""
    m, n, k, cfg = next(c for c in CASES if _splits(c) > 1)
    xq, xs, w, ws = _operands("int8", m, n, k, torch.device("cpu"))
    stream = ["a"]
    monkeypatch.setattr(g, "_no_stream", lambda index: stream[0])
    p = g._problem_of(xq, xs, w, ws, None, torch.bfloat16)
    c = g._small_m_call(p, g._config_key(cfg))
    seen, fused = [], c.fused
    monkeypatch.setattr(c, "fused", lambda tensors, scalars, ptrs=None: (seen.append(tensors[7]),
                                                                          fused(tensors, scalars, ptrs)))
    call = g.bind_small_m(p, w, ws, None, cfg)
    want = g.small_m_gemm(xq, xs, w, ws, None, torch.bfloat16, cfg)  # the two-kernel plan
    for i, name in enumerate("abab"):
        stream[0] = name
        assert_bits_equal(call(xq, xs), want, f"call {i} on stream {name}")
        assert seen[-1].shape == (c.tiles,) and not seen[-1].any(), f"counters after call {i}: {seen[-1]}"
    assert seen[0] is seen[2] and seen[1] is seen[3] and seen[0] is not seen[1]


@pytest.mark.interpreter
def test_split_k_partials_are_one_workspace_per_stream_shared_by_every_bound_call(monkeypatch):
    """Eager one-launch split-K calls after a caller's first on a stream keep their partials in one workspace per
    stream and accumulator dtype, shared by every bound call and grown to the largest: calls of two problems
    taking turns on two streams give the two-kernel plan's bits; a caller's first call on a stream (as the
    checked entry's one-call callers make, under torch.compile in the CUDA-graph trees' pool) takes partials of
    its own; a reset forgets the workspaces."""
    import fused_quant

    split = [c for c in CASES if _splits(c) > 1]
    small, big = min(split, key=lambda c: _splits(c) * c[0] * c[1]), max(split, key=lambda c: _splits(c) * c[0] * c[1])
    assert _splits(small) * small[0] * small[1] < _splits(big) * big[0] * big[1]
    stream = ["a"]
    monkeypatch.setattr(g, "_no_stream", lambda index: stream[0])
    fused_quant.reset()
    calls = {}
    for name, (m, n, k, cfg) in (("small", small), ("big", big)):
        xq, xs, w, ws = _operands("int8", m, n, k, torch.device("cpu"), seed=m + n)
        p = g._problem_of(xq, xs, w, ws, None, torch.bfloat16)
        c = g._small_m_call(p, g._config_key(cfg))
        seen, fused = [], c.fused
        monkeypatch.setattr(c, "fused", lambda tensors, scalars, ptrs=None, seen=seen, fused=fused: (
            seen.append(tensors[6]), fused(tensors, scalars, ptrs)))
        want = g.small_m_gemm(xq, xs, w, ws, None, torch.bfloat16, cfg)  # the two-kernel plan
        calls[name] = (g.bind_small_m(p, w, ws, None, cfg), xq, xs, want, seen, c.splits * m * n)
    firsts = {}
    for name, on in (("small", "a"), ("big", "a"), ("small", "b"), ("big", "b")):  # each caller's first call there
        stream[0] = on
        call, xq, xs, want, seen, numel = calls[name]
        assert_bits_equal(call(xq, xs), want, f"first call: {name} on stream {on}")
        firsts[name, on] = seen.pop()
        assert firsts[name, on].numel() == numel and all(firsts[name, on] is not v for v in g._PARTIALS._data.values())
    assert not g._PARTIALS._data  # one-call callers keep nothing
    for i, (name, on) in enumerate([("small", "a"), ("big", "a"), ("small", "a"), ("small", "b"), ("big", "b"),
                                    ("big", "a")]):
        stream[0] = on
        call, xq, xs, want, seen, numel = calls[name]
        assert_bits_equal(call(xq, xs), want, f"call {i}: {name} on stream {on}")
        assert seen[-1].dim() == 1 and seen[-1].numel() >= numel and seen[-1].dtype == torch.int32
    small_seen, big_seen = calls["small"][4], calls["big"][4]
    # stream a: the small call's workspace, then the big one's (grown), kept for the small call after it
    assert big_seen[0] is not small_seen[0] and small_seen[1] is big_seen[0] and big_seen[2] is big_seen[0]
    assert small_seen[2] is not small_seen[0] and big_seen[1] is not big_seen[0]  # stream b: its own
    fused_quant.reset()
    stream[0] = "a"
    call, xq, xs, want, seen, _ = calls["small"]
    monkeypatch.setattr(g, "_small_m_call", lambda *a, **kw: pytest.fail("bound calls keep their launches"))
    assert_bits_equal(call(xq, xs), want, "after a reset")
    assert seen[-1] is not big_seen[0] and seen[-1].numel() == calls["small"][5]
    assert g._PARTIALS.get((-1, "a", torch.int32)) is seen[-1]


@pytest.mark.gpu
@pytest.mark.parametrize("key_name", QUANTIZING_KEYS)
def test_gpu_quantizing_kernel_replays_bitwise_eager(key_name):
    """Split-K, captured: replays give the eager call's bits (the producer-then-GEMM bits are
    ``test_quantizing_kernel_is_the_producer_then_the_gemm``'s, split-K cases included)."""
    m, n, k = 8, 4096, 14336
    kind = key_name[:key_name.index("_")]
    _, _, w, ws = _operands(kind, m, n, k, torch.device("cuda"))
    x = _float_input(m, k, torch.bfloat16, torch.device("cuda"), 0, False)
    per_token = "token" in key_name
    scale = None if per_token else torch.tensor([0.02], device="cuda")
    p = GemmProblem(m, n, k, kind, w.dtype, torch.bfloat16, x.device, per_token, True, False)
    call = g.bind_small_m_quantizing(p, w, ws, None, (key_name, torch.bfloat16),
                                     dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=4, num_warps=4, num_stages=4))
    eager = call(x, scale)
    graph, out = capture_graph(call, x, scale)
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        assert_bits_equal(out, eager, f"{key_name} replay")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_gpu_one_bound_split_k_call_on_two_streams_at_once(kind):
    """A bound split-K call's tile counters are per stream: the same bound call run on two streams at once
    gives every call the bits of one call alone (counters shared by both would reduce tiles early or never)."""
    m, n, k = 8, 4096, 14336
    xq, xs, w, ws = _operands(kind, m, n, k, torch.device("cuda"))
    p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    call = g.bind_small_m(p, w, ws, None, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=4, num_warps=4,
                                                num_stages=4))
    want = call(xq, xs)
    streams = [torch.cuda.Stream() for _ in range(2)]
    for stream in streams:
        stream.wait_stream(torch.cuda.current_stream())
    outs = []
    for _ in range(20):
        for stream in streams:
            with torch.cuda.stream(stream):
                outs.append(call(xq, xs))
    torch.cuda.synchronize()
    for i, out in enumerate(outs):
        assert_bits_equal(out, want, f"call {i} on stream {i % 2}")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_gpu_bound_split_k_calls_share_each_streams_partials(kind):
    """Bound split-K calls of two shapes taking turns, 20 times each with no sync between them, on one stream and
    then on two streams at once: each stream's partials workspace serves both, and every call gives the bits of
    the two-kernel plan's call alone (its own partials)."""
    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=4, num_warps=4, num_stages=4)
    calls = []
    for m, n, k in ((16, 6144, 4096), (8, 4096, 14336)):
        xq, xs, w, ws = _operands(kind, m, n, k, torch.device("cuda"), seed=n)
        p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
        want = g.small_m_gemm(xq, xs, w, ws, None, torch.bfloat16, cfg)
        calls.append((g.bind_small_m(p, w, ws, None, cfg), xq, xs, want))
    outs = [(i, call(xq, xs), want) for i in range(20) for call, xq, xs, want in calls]
    streams = [torch.cuda.Stream() for _ in range(2)]
    for stream in streams:
        stream.wait_stream(torch.cuda.current_stream())
    for i in range(20):
        for j, (call, xq, xs, want) in enumerate(calls):
            with torch.cuda.stream(streams[(i + j) % 2]):
                outs.append((20 + i, call(xq, xs), want))
    torch.cuda.synchronize()
    for i, out, want in outs:
        assert_bits_equal(out, want, f"turn {i}, {tuple(out.shape)}")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int8", "fp8"])
@pytest.mark.parametrize("splits", [1, 4])
def test_gpu_graph_replay_is_bitwise_eager(kind, splits):
    m, n, k = 8, 4096, 14336
    xq, xs, w, ws = _operands(kind, m, n, k, torch.device("cuda"))
    p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    call = g.bind_small_m(p, w, ws, None, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=splits, num_warps=4,
                                                num_stages=4))
    eager = call(xq, xs)
    assert_bits_equal(call(xq, xs), eager, "a second eager run")  # the direct launch, same bits
    graph, out = capture_graph(call, xq, xs)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert_bits_equal(out, eager, f"replay, splits={splits}")


# (M, N, K): one token, a partial token block, more tokens than the largest bucket; N and K multiples of 16
SCALED_MM_SHAPES = [(1, 256, 512), (17, 4096, 4096), (300, 1040, 2064), (64, 272, 14336)]


@pytest.mark.gpu
@pytest.mark.parametrize("way", g.SCALED_MM_WAYS, ids=("tensor_wise", "row_wise", "fp32_epilogue"))
@pytest.mark.parametrize("out_dtype,bias,per_token,per_channel", [
    (torch.bfloat16, False, True, True), (torch.bfloat16, True, False, True), (torch.float16, True, True, True),
    (torch.float32, False, True, False), (torch.bfloat16, True, False, False)])
def test_gpu_scaled_mm_ways_against_float64(way, out_dtype, bias, per_token, per_channel):
    """Each way of ``bind_scaled_mm`` where it can run (tensor-wise: one scale each; row-wise: bf16 out) against
    float64; the fp32 product plus epilogue also bitwise ``dequant_epilogue`` of ``torch._scaled_mm``'s fp32
    product, eager and replayed from a CUDA graph."""
    for m, n, k in SCALED_MM_SHAPES:
        xq, xs, w, ws = _operands("fp8", m, n, k, torch.device("cuda"), seed=m + n, adversarial=m % 2 == 1)
        if out_dtype == torch.float16:
            xs = xs * 1e-3
        xs = xs if per_token else xs[:1].contiguous()
        ws = ws if per_channel else ws[:1].contiguous()
        b = (torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3).to(out_dtype).cuda() if bias else None
        p = g._problem_of(xq, xs, w, ws, b, out_dtype)
        if way not in g.scaled_mm_ways(p):
            continue
        call = g.bind_scaled_mm(p, w, ws, b, way)
        out = call(xq, xs)
        what = f"{way} {m}x{n}x{k} {out_dtype} bias={bias} per_token={per_token} per_channel={per_channel}"
        assert out.shape == (m, n) and out.dtype == out_dtype, what
        assert_gemm_close(out, xq, xs.expand(m, 1), w, ws.expand(n, 1), b, exact_acc=False, what=what)
        if way == g.SCALED_MM_FP32:
            one = torch.ones((), device="cuda")
            acc = torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
            assert_bits_equal(out, dequant_epilogue(acc + 0.0, xs, ws, b, out_dtype), f"{what}: vs dequant_epilogue")
            graph, replayed = capture_graph(call, xq, xs)
            graph.replay()
            torch.cuda.synchronize()
            assert_bits_equal(replayed, out, f"{what}: replayed")


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [2, 4])
def test_gpu_split_k_reduction_after_the_fp32_ways_epilogue_of_the_same_problem(splits):
    """As the sweep runs them: the fp32 way of one FP8 problem (its epilogue over one split, launched directly from
    its second call on), then a split-K config of the same problem, unbound (the reduction kernel), then the fp32
    way again, each against float64 (fresh random and adversarial operands)."""
    m, n, k = 16, 256, 4096
    for adversarial in (False, True):
        xq, xs, w, ws = _operands("fp8", m, n, k, torch.device("cuda"), seed=splits, adversarial=adversarial)
        p = g._problem_of(xq, xs, w, ws, None, torch.bfloat16)
        fp32 = g.bind_scaled_mm(p, w, ws, None, g.SCALED_MM_FP32)
        cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=128, splits=splits, num_warps=4, num_stages=4)
        for what, call in (("fp32 way", lambda: fp32(xq, xs)), ("fp32 way, direct", lambda: fp32(xq, xs)),
                           ("split-K", lambda: g.small_m_gemm(xq, xs, w, ws, None, torch.bfloat16, config=cfg)),
                           ("split-K, direct", lambda: g.small_m_gemm(xq, xs, w, ws, None, torch.bfloat16, config=cfg)),
                           ("fp32 way after split-K", lambda: fp32(xq, xs))):
            assert_gemm_close(call(), xq, xs, w, ws, exact_acc=False,
                              what=f"{what}, {splits} splits, adversarial={adversarial}")


@pytest.mark.gpu
def test_gpu_row_wise_scaled_mm_with_strided_scales():
    """The row-wise way given per-token and per-channel scales that are columns of wider tensors (the checked entry
    takes them; ``torch._scaled_mm`` wants them contiguous), through the checked entry's call, against float64."""
    m, n, k = 300, 1040, 2064
    xq, xs, w, ws = _operands("fp8", m, n, k, torch.device("cuda"), seed=7, adversarial=True)
    xs_strided, ws_strided = torch.cat([xs, xs + 1], 1)[:, :1], torch.cat([ws + 1, ws], 1)[:, 1:]
    assert not xs_strided.is_contiguous() and not ws_strided.is_contiguous()
    p = g._problem_of(xq, xs_strided, w, ws_strided, None, torch.bfloat16)
    out = g.bind_scaled_mm(p, w, ws_strided, None, g.SCALED_MM_ROW_WISE)(xq, xs_strided)
    assert_gemm_close(out, xq, xs, w, ws, exact_acc=False, what="row-wise, strided scales")


@pytest.mark.gpu
@pytest.mark.triton_fp8
def test_chain_picks_small_m_where_the_table_says(backend_env):
    from fused_quant.gemm import select_gemm_provider
    from fused_quant.kernels import launch

    backend_env("triton_fp8")
    arch = launch._cuda_arch(torch.cuda.current_device())
    model = launch.device_name(torch.cuda.current_device())
    # the rows this GPU takes: its model's own where it has them, else the arch's
    taken = {}
    for r in json.loads(g.SMALL_M_CONFIG_FILE.read_text())["rows"]:
        if r["arch"] == arch and r.get("device") in (None, model):
            key = (r["kind"], r["n"], r["k"], r["m"])
            if r.get("device") == model or key not in taken:
                taken[key] = r
    rows = list(taken.values())
    if not rows:
        pytest.skip(f"no sweep of {arch} in the committed table")
    for row in rows:
        i = g.M_BUCKETS.index(row["m"])
        for m in {row["m"], g.M_BUCKETS[i - 1] + 1 if i else 1}:  # each bucket's top and bottom
            dtype = torch.int8 if row["kind"] == "int8" else FP8
            p = GemmProblem(m, row["n"], row["k"], row["kind"], dtype, torch.bfloat16, torch.device("cuda"),
                            True, True, False)
            name = select_gemm_provider(p)[0].name
            faster = row["us"] < g.torch_time(row, g.torch_peers(p, "triton_fp8"))[1]
            assert (name == f"small_m_{row['kind']}") == faster, (row, m, name)
            if row["kind"] == "fp8":  # and torch._scaled_mm's faster row-wise way for a per-token problem
                times = {way: row["torch_all"][way] for way in (g.SCALED_MM_ROW_WISE, g.SCALED_MM_FP32)}
                assert g.scaled_mm_way(p) == min(times, key=times.get), (row, m)


@pytest.mark.gpu
@pytest.mark.triton_fp8
@pytest.mark.parametrize("kind", ["int8", "fp8"])
def test_gpu_checked_entry_with_odd_layer_operands(kind, backend_env):
    """Through the checked entry and the bound path alike: a bias that is not 16-byte aligned, and M = 1
    with a per-token key and one weight scale (the launch is shared by every layer of a shape); a weight
    scale that is not contiguous through the checked entry, which is never bound (a bound call would hold a
    contiguous copy, which a write into the scale would leave stale)."""
    from fused_quant import keys as K
    from fused_quant.contract import QuantizedActivation
    from fused_quant.gemm import bind_gemm, quant_gemm

    backend_env("triton_fp8")
    m, n, k = 1, 4096, 4096
    key = K.kInt8DynamicTokenSym if kind == "int8" else K.kFp8DynamicTokenSym
    xq, xs, w, ws = _operands(kind, m, n, k, torch.device("cuda"))
    qa = QuantizedActivation(xq, xs, torch.bfloat16, xq.shape, key)
    aligned = quant_gemm(qa, w, ws, None, out_dtype=torch.bfloat16)
    assert_gemm_close(aligned, xq, xs, w, ws, exact_acc=kind == "int8", what="aligned")
    bias = (torch.randn(n + 1, device="cuda") * 3).to(torch.bfloat16)[1:]  # 2-byte offset
    ws_strided = torch.cat([ws, ws], dim=1)[:, :1]  # [N, 1] with row stride 2
    for what, (s, b) in {"unaligned bias": (ws, bias), "strided scale": (ws_strided, None),
                         "one weight scale": (ws[:1].contiguous(), bias)}.items():
        out = quant_gemm(qa, w, s, b, out_dtype=torch.bfloat16)
        assert_gemm_close(out, xq, xs, w, s.expand(n, 1), b, exact_acc=kind == "int8", what=what)
        bound = bind_gemm(xq, xs, w, s, b, torch.bfloat16, key)
        if what == "strided scale":
            assert bound is None, what
            continue
        assert_bits_equal(bound(xq, xs), out, f"{what}: bound vs checked")


def test_sweep_install_merges_row_by_row(tmp_path):
    """A partial sweep (one kind) replaces only the rows it swept; the rest of the table stays, in its order, and a row
    the table lacks is added. The arch's meta, and a GPU model's for its own rows, stays while an install replaces
    part of the rows it describes (each installed row stamped: ``swept``, and ``retimed`` from a ``--retime``); an
    install of every one of them brings its own."""
    from benchmarks.sweep_small_m_gemm import install

    def row(kind, m, us, device=None):
        return dict(_table_row(m, us, 10.0, device), kind=kind)

    def meta(device, date, **more):
        return {"device": device, "date": date, **more}

    arch_meta, own_meta = meta("NVIDIA H200", "2026-01-01"), meta(_MODEL, "2026-01-02")
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"metas": {"sm_90": arch_meta, "gfx942": {"date": "amd"}}, "models": {_MODEL: own_meta},
                                 "rows": [row("int8", 1, 8.0), row("fp8", 1, 9.0), row("fp8", 2, 9.5),
                                          row("int8", 1, 8.2, _MODEL), row("int8", 16, 9.2, _MODEL)]}))
    sweep = tmp_path / "sweep.json"

    def installed(meta_, rows):
        sweep.write_text(json.dumps({"meta": meta_, "rows": rows}))
        install(sweep, table)
        return json.loads(table.read_text())

    def stamps(got):
        return [{f: r[f] for f in ("swept", "retimed") if f in r} for r in got["rows"]]

    got = installed(meta("NVIDIA H200", "2026-02-01", retime=True), [row("fp8", 2, 8.5), row("fp8", 4, 8.7)])
    assert [(r.get("device"), r["kind"], r["m"], r["us"]) for r in got["rows"]] == [
        (None, "int8", 1, 8.0), (None, "fp8", 1, 9.0), (None, "fp8", 2, 8.5), (_MODEL, "int8", 1, 8.2),
        (_MODEL, "int8", 16, 9.2), (None, "fp8", 4, 8.7)]
    retimed = {"swept": "NVIDIA H200 2026-02-01", "retimed": True}
    assert stamps(got) == [{}, {}, retimed, {}, {}, retimed]
    assert got["metas"] == {"sm_90": arch_meta, "gfx942": {"date": "amd"}} and got["models"] == {_MODEL: own_meta}
    got = installed(meta(_MODEL, "2026-02-02"), [row("int8", 16, 7.2, _MODEL)])  # one of the model's own rows
    assert stamps(got)[4] == {"swept": f"{_MODEL} 2026-02-02"} and got["models"] == {_MODEL: own_meta}
    searched = meta("NVIDIA H200", "2026-03-01")  # every row the arch's meta describes, its new bucket too
    got = installed(searched, [row("int8", 1, 7.0), row("fp8", 1, 7.1), row("fp8", 2, 7.2), row("fp8", 4, 7.3)])
    assert got["metas"] == {"sm_90": searched, "gfx942": {"date": "amd"}} and got["models"] == {_MODEL: own_meta}
    assert stamps(got) == [{"swept": "NVIDIA H200 2026-03-01"}] * 3 + [{}, {"swept": f"{_MODEL} 2026-02-02"},
                                                                       {"swept": "NVIDIA H200 2026-03-01"}]
    own_retimed = meta(_MODEL, "2026-03-02", retime=True)  # every row of the model's own
    got = installed(own_retimed, [row("int8", 1, 8.1, _MODEL), row("int8", 16, 9.1, _MODEL)])
    assert got["models"] == {_MODEL: own_retimed} and got["metas"]["sm_90"] == searched
    assert stamps(got)[3:5] == [{"swept": f"{_MODEL} 2026-03-02", "retimed": True}] * 2
    g.check_rows(got["rows"], str(table))  # the stamps are rows the provider reads
    assert g._swept_row("sm_90", "int8", 4096, 4096, 1, table, _MODEL)[0]["retimed"] is True


_MODEL = "NVIDIA A GPU MODEL"


def _table_row(m, us, torch_us, device=None, n=4096, block_n=64):
    row = dict(arch="sm_90", kind="int8", shape="o", n=n, k=4096, m=m, BLOCK_N=block_n, BLOCK_M=16, BLOCK_K=256,
               splits=1, num_warps=4, num_stages=4, us=us, torch_us=torch_us, torch="triton_int8",
               torch_all={"triton_int8": torch_us})
    return row if device is None else dict(row, device=device)


def test_a_gpu_models_own_rows_serve_that_model_only_and_the_archs_fill_its_gaps(tmp_path):
    """A table with the arch's rows and one GPU model's own (a row's ``device``): that model takes its own row at a
    bucket where it has one (config and provider choice), the arch's row at a bucket it lacks; any other model, and a
    problem with no model named, takes the arch's rows; a model's rows alone serve an arch without rows of its own."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"metas": {"sm_90": {"device": "NVIDIA H200"}},
                                 "models": {_MODEL: {"device": _MODEL, "retime": True}},
                                 "rows": [_table_row(1, 8.0, 9.0), _table_row(16, 9.0, 10.0),
                                          _table_row(1, 8.5, 8.0, _MODEL, block_n=128),
                                          dict(_table_row(1, 7.0, 9.0, "ANOTHER MODEL", block_n=32), arch="sm_100")]}))
    own, _ = g._swept_row("sm_90", "int8", 4096, 4096, 1, table, _MODEL)
    assert own["device"] == _MODEL and own["BLOCK_N"] == 128 and g._faster_config(own, None)[0] is None  # torch wins
    arch, _ = g._swept_row("sm_90", "int8", 4096, 4096, 16, table, _MODEL)  # no own row at 16: the arch's
    assert "device" not in arch and arch["m"] == 16
    for model in ("NVIDIA H200", None):
        row, _ = g._swept_row("sm_90", "int8", 4096, 4096, 1, table, model)
        assert "device" not in row and row["BLOCK_N"] == 64 and g._faster_config(row, None)[0] is not None
    row, _ = g._swept_row("sm_100", "int8", 4096, 4096, 1, table, "ANOTHER MODEL")
    assert row["BLOCK_N"] == 32
    row, why = g._swept_row("sm_100", "int8", 4096, 4096, 1, table, "NVIDIA H200")
    assert row is None and "no measured int8 small-M configs for sm_100" in why
    row, why = g._swept_row("sm_90", "int8", 4096, 4096, 64, table, _MODEL)
    assert row is None and "no int8 config swept at M bucket 64 on sm_90" in why
    assert g.model_metas(table) == {_MODEL: {"device": _MODEL, "retime": True}}


def test_an_archs_row_of_the_problems_own_shape_answers_before_a_models_row_of_another(tmp_path):
    """A GPU model's own rows and the arch's are one search, the nearest shape first: a shape swept into the arch's
    rows (README's ``--model``) serves a model whose own rows hold other shapes; the model's own row wins a tie (the
    same shape in both, or two shapes as near); a shape in neither takes the nearest of either."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"metas": {"sm_90": {"device": "NVIDIA H200"}},
                                 "models": {_MODEL: {"device": _MODEL, "retime": True}},
                                 "rows": [_table_row(1, 8.0, 9.0), _table_row(1, 8.0, 9.0, n=11008, block_n=32),
                                          _table_row(1, 8.5, 9.0, _MODEL, block_n=128)]}))
    row, _ = g._swept_row("sm_90", "int8", 11008, 4096, 1, table, _MODEL)  # only the arch swept 11008
    assert "device" not in row and row["n"] == 11008 and row["BLOCK_N"] == 32
    row, _ = g._swept_row("sm_90", "int8", 4096, 4096, 1, table, _MODEL)  # both swept 4096: the model's own
    assert row["device"] == _MODEL and row["BLOCK_N"] == 128
    row, _ = g._swept_row("sm_90", "int8", 5000, 4096, 1, table, _MODEL)  # nearer 4096 (log2): the model's
    assert row["device"] == _MODEL
    row, _ = g._swept_row("sm_90", "int8", 9000, 4096, 1, table, _MODEL)  # nearer 11008: the arch's
    assert "device" not in row and row["n"] == 11008
    row, _ = g._swept_row("sm_90", "int8", 11008, 4096, 1, table, None)  # no model: the arch's rows alone
    assert row["BLOCK_N"] == 32


def test_sweep_installs_a_models_own_rows_beside_the_archs(tmp_path, capsys):
    """``--own-rows`` rows install beside the arch's (which stay), under the model's meta (``"models"``); the pick
    changes are told against the row that model took before (the arch's, the first time), and a retime of that model
    times the configs it takes: its own rows' where it has them, else the arch's, never another model's."""
    from benchmarks.sweep_small_m_gemm import install, retime_configs

    table = tmp_path / "table.json"
    arch_rows = [_table_row(1, 8.0, 9.0), _table_row(16, 9.0, 10.0)]
    table.write_text(json.dumps({"metas": {"sm_90": {"date": "arch"}}, "rows": arch_rows}))
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"meta": {"date": "own"}, "rows": [_table_row(1, 8.5, 8.0, _MODEL, block_n=128)]}))
    changes = install(sweep, table)
    got = json.loads(table.read_text())
    assert got["rows"] == [*arch_rows, _table_row(1, 8.5, 8.0, _MODEL, block_n=128)]
    assert got["metas"] == {"sm_90": {"date": "arch"}} and got["models"] == {_MODEL: {"date": "own"}}
    assert len(changes) == 2 and all(line.startswith(f"sm_90 {_MODEL} int8 N=4096 K=4096 M=1 against ")
                                     and "small-M GEMM -> torch" in line for line in changes), changes
    sweep.write_text(json.dumps({"meta": {"date": "own again"}, "rows": [_table_row(1, 7.5, 8.0, _MODEL)]}))
    install(sweep, table)  # the model's row replaced, the arch's kept
    got = json.loads(table.read_text())
    assert got["rows"] == [*arch_rows, _table_row(1, 7.5, 8.0, _MODEL)] and got["models"] == {_MODEL: {"date":
                                                                                                        "own again"}}
    rows = [*arch_rows, _table_row(1, 7.5, 8.0, _MODEL, block_n=128), _table_row(16, 1.0, 2.0, "ANOTHER", block_n=8)]
    key = ("sm_90", "int8", 4096, 4096)
    assert retime_configs(rows, [1, 16], model=_MODEL)[(*key, 1)]["BLOCK_N"] == 128  # its own row's
    assert retime_configs(rows, [1, 16], model=_MODEL)[(*key, 16)]["BLOCK_N"] == 64  # the arch's, never ANOTHER's
    assert retime_configs(rows, [1, 16])[(*key, 1)]["BLOCK_N"] == 64  # the arch's rows retimed as the arch's


def _sweep_files(tmp_path):
    """A saved sweep's log (two configs timed for FP8 o at M = 1, other lines between) and table."""
    from benchmarks.sweep_small_m_gemm import trial_line

    cfg = dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=2, num_warps=4, num_stages=6)
    log = tmp_path / "sweep.log"
    log.write_text("\n".join(["fp8  o  M=   1 ours 7.5 us ...", trial_line("fp8", "o", 1, 7.52, cfg),
                               "  skip {'BLOCK_N': 256}: OutOfResources",
                               trial_line("fp8", "o", 1, 9.25, dict(cfg, splits=1)),
                               trial_line("int8", "gate_up", 256, 1234.5, cfg)]) + "\n")
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"rows": [
        dict(arch="sm_90", kind="fp8", shape="o", n=4096, k=4096, m=1, us=7.52, torch_us=7.44, **cfg),
        dict(arch="sm_90", kind="int8", shape="gate_up", n=28672, k=4096, m=256, us=1234.5, torch_us=70.0, **cfg)]}))
    return log, table, cfg


def test_sweep_log_gives_back_every_config_timed(tmp_path):
    from benchmarks.sweep_small_m_gemm import parse_trials

    log, _, cfg = _sweep_files(tmp_path)
    assert parse_trials(log.read_text().splitlines()) == [
        dict(kind="fp8", shape="o", m=1, us=7.52, **cfg), dict(kind="fp8", shape="o", m=1, us=9.25, **dict(cfg, splits=1)),
        dict(kind="int8", shape="gate_up", m=256, us=1234.5, **cfg)]


def test_sweep_replot_draws_a_saved_sweep(tmp_path, monkeypatch, capsys):
    from benchmarks import sweep_small_m_gemm as s

    log, table, _ = _sweep_files(tmp_path)
    for extra in (["--install"], ["--retime"], ["--retime", "--seed-from", "16"]):
        with pytest.raises(SystemExit) as exc:
            s.main(["--out", str(tmp_path / "a"), "--replot", str(log), str(table), *extra])
        assert exc.value.code == 2 and "--replot only draws" in capsys.readouterr().err
    drawn = []
    monkeypatch.setattr(s, "plot", lambda rows, trials, path: drawn.append((rows, trials, path)) or True)
    assert s.main(["--out", str(tmp_path / "d"), "--replot", str(log), str(table), "--kinds", "int8"]) == 0
    (rows, trials, path), = drawn
    assert [r["shape"] for r in rows] == ["gate_up"] and len(trials) == 3 and path == tmp_path / "d" / s.PICTURE
    assert s.main(["--out", str(tmp_path / "d"), "--replot", str(log), str(table), "--ms", "16"]) == 2
    assert "the rows of one arch" in capsys.readouterr().err  # none left to draw
    assert s.main(["--out", str(tmp_path / "d"), "--replot", str(tmp_path / "no.log"), str(table)]) == 2
    assert "FileNotFoundError" in capsys.readouterr().err
    for other in ("[1, 2]", '{"rows": 5}', '{"rows": [{"a": 1}]}'):  # JSON of another shape: one line, no traceback
        (tmp_path / "other.json").write_text(other)
        assert s.main(["--out", str(tmp_path / "d"), "--replot", str(log), str(tmp_path / "other.json")]) == 2
        assert capsys.readouterr().err.startswith("sweep_small_m_gemm: --replot reads a sweep's log and its "
                                                  "small_m_gemm_configs")
    (tmp_path / "afile").write_text("")
    assert s.main(["--out", str(tmp_path / "afile"), "--replot", str(log), str(table)]) == 2
    assert capsys.readouterr().err.startswith(f"sweep_small_m_gemm: --out {tmp_path / 'afile'} cannot be made")
    monkeypatch.undo()
    monkeypatch.setattr(s, "pyplot", lambda: None)
    assert s.main(["--out", str(tmp_path / "b"), "--replot", str(log), str(table)]) == 2
    assert "needs matplotlib" in capsys.readouterr().err
    monkeypatch.undo()
    pytest.importorskip("matplotlib")
    assert s.main(["--out", str(tmp_path / "c"), "--replot", str(log), str(table)]) == 0
    assert (tmp_path / "c" / s.PICTURE).stat().st_size > 10_000


def test_sweep_install_names_each_problem_whose_pick_changes(tmp_path):
    """A re-timed row that turns a problem from the small-M GEMM to a torch provider (or back) is named with both
    times, for each peer set a chain may weigh: the twenty-sixth round's FP8 gate_up at 64 tokens (config kept,
    34.32 against tensor-wise 34.31 us) moved per-tensor keys to ``torch._scaled_mm``, silently then."""
    from benchmarks.sweep_small_m_gemm import install

    tw, rw, fp32 = g.SCALED_MM_TENSOR_WISE, g.SCALED_MM_ROW_WISE, g.SCALED_MM_FP32

    def row(kind, m, us, torch_all):
        return dict(arch="sm_90", kind=kind, n=28672, k=4096, m=m, us=us, torch_all=torch_all, BLOCK_N=128, BLOCK_M=64,
                    BLOCK_K=128, splits=1, num_warps=4, num_stages=4)

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"metas": {}, "rows": [
        row("fp8", 64, 35.71, {tw: 38.14, rw: 45.0, fp32: 41.4}),
        row("fp8", 32, 33.0, {tw: 30.0, rw: 44.0, fp32: 32.5}),
        row("int8", 64, 34.98, {"triton_int8": 42.06, "int_mm_int8": 61.0}),
        row("int8", 32, 33.9, {"triton_int8": 41.5, "int_mm_int8": 33.0})]}))
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"meta": {}, "rows": [
        row("fp8", 64, 34.32, {tw: 34.31, rw: 47.58, fp32: 41.35}),
        row("fp8", 32, 33.0, {tw: 30.0, rw: 44.0, fp32: 33.5}),  # bf16 and fp16 output: fp32 way -> small-M
        row("int8", 64, 34.38, {"triton_int8": 41.31, "int_mm_int8": 61.0}),  # the small-M GEMM either way
        row("int8", 32, 33.2, {"triton_int8": 40.7, "int_mm_int8": 51.1})]}))  # where int_mm was faster
    lines = install(sweep, table)
    assert lines == [
        f"sm_90 fp8 N=28672 K=4096 M=64 against {tw}: small-M GEMM -> torch (small-M 34.32 vs {tw} 34.31 us; before "
        f"35.71 vs {tw} 38.14)",
        f"sm_90 fp8 N=28672 K=4096 M=32 against {rw} / {fp32}: torch -> small-M GEMM (small-M 33.00 vs {fp32} 33.50 us; "
        f"before 33.00 vs {fp32} 32.50)",
        f"sm_90 fp8 N=28672 K=4096 M=32 against {fp32}: torch -> small-M GEMM (small-M 33.00 vs {fp32} 33.50 us; "
        f"before 33.00 vs {fp32} 32.50)",
        "sm_90 int8 N=28672 K=4096 M=32 against every torch provider timed: torch -> small-M GEMM (small-M 33.20 vs "
        "triton_int8 40.70 us; before 33.90 vs int_mm_int8 33.00)",
        "sm_90 int8 N=28672 K=4096 M=32 against int_mm_int8: torch -> small-M GEMM (small-M 33.20 vs int_mm_int8 51.10 "
        "us; before 33.90 vs int_mm_int8 33.00)"]
    assert install(sweep, table) == []  # installed already: nothing changes


# --- the GEMM applying the next layer's silu_and_mul producer to its output ------------------------

# (M, N, K, config) with one K split: gate | up rows of N / 2 each; odd N / 2 (a block's columns past it, with
# one token and with several), a K tail, several token blocks, one block of N; bias and fp16 output where M is
# odd and M + N is odd (the test's rule)
PRODUCING_CASES = [
    (1, 66, 70, dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)),
    (5, 64, 96, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)),
    (19, 96, 64, dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=64, splits=1, num_warps=4, num_stages=2)),
    (6, 74, 64, dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)),
    (2, 96, 100, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=32, splits=1, num_warps=4, num_stages=2)),
    # one-token blocks: a gate row and its up row per program; two tokens, each its own block
    (1, 66, 70, dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=32, splits=1, num_warps=1, num_stages=1)),
    (2, 74, 64, dict(BLOCK_N=8, BLOCK_M=1, BLOCK_K=32, splits=1, num_warps=1, num_stages=1)),
]
GPU_PRODUCING_CASES = [
    (1, 2 * 1000, 512, dict(BLOCK_N=64, BLOCK_M=16, BLOCK_K=256, splits=1, num_warps=4, num_stages=4)),
    (1, 2 * 1000, 4100, dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=512, splits=1, num_warps=1, num_stages=1)),
    (16, 2 * 2048, 1024, dict(BLOCK_N=256, BLOCK_M=16, BLOCK_K=128, splits=1, num_warps=8, num_stages=4)),
    (40, 2 * 1536, 4096, dict(BLOCK_N=128, BLOCK_M=64, BLOCK_K=128, splits=1, num_warps=4, num_stages=4)),
]
PRODUCING = ([pytest.param("cpu", c, marks=pytest.mark.interpreter) for c in PRODUCING_CASES]
             + [pytest.param("cuda", c, marks=pytest.mark.gpu) for c in GPU_PRODUCING_CASES])


def _producer_launch(h, key_name, round_product, scale):
    """The package's Triton silu_and_mul producer bound for ``h`` (its launch and its ``(q, scale)``)."""
    from fused_quant.kernels import launch

    bound = launch.bind_rows(h, h, "silu_and_mul", key_name, round_product, FP8)
    return bound, bound(h, scale)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("key_name", STATIC_KEYS)
@pytest.mark.parametrize("device,case", PRODUCING)
@pytest.mark.parametrize("round_product", [True, False], ids=["default", "hcu"])
@pytest.mark.parametrize("input_form", ["quantized", "float"])
@pytest.mark.parametrize("per_channel", [True, False], ids=["channel_w", "tensor_w"])
def test_producing_kernel_is_the_gemm_then_the_silu_producer(key_name, device, case, round_product, input_form,
                                                             per_channel):
    """The small-M GEMM applying the next layer's silu_and_mul + per-tensor quantizer to its output stores the
    bits of that producer launched on the GEMM's own output (and its output those of the spec's producer):
    with a quantized input and with a float one it quantizes itself, fresh random data and adversarial rows
    (large outputs that saturate, zero rows, NaN where a float input holds it)."""
    from fused_quant import keys as K
    from fused_quant.reference import act_quant_ref

    m, n, k, cfg = case
    device = torch.device(device)
    key = K.KEYS[key_name]
    kind = "fp8" if K.is_fp8(key) else "int8"
    out_dtype = (torch.bfloat16, torch.float16)[(m + n) % 2]
    _, _, w, ws = _operands(kind, m, n, k, device, seed=m)
    ws = ws if per_channel else ws[:1].contiguous()  # one weight scale: read as a scalar by the epilogue
    x = _float_input(m, k, torch.bfloat16, device, seed=n, adversarial=m > 4)
    x_scale = torch.tensor([0.02 if kind == "fp8" else 0.03], device=device)
    xq, xs = quant_ref_for(x, key, x_scale, device)
    b = (torch.randn(n, generator=torch.Generator().manual_seed(k)) * 3).to(out_dtype).to(device) if m % 2 else None
    p = GemmProblem(m, n, k, kind, xq.dtype, out_dtype, xq.device, False, per_channel, b is not None)
    h = g.bind_small_m(p, w, ws, b, cfg)(xq, xs)  # the GEMM's own output
    y_scale = torch.tensor([0.05 if kind == "fp8" else 0.4], device=device)
    producer, (q_ref, s_ref) = _producer_launch(h, key_name, round_product, y_scale)
    # the spec on the same device (silu's exp: devices may round it otherwise, docs/NUMERICS.md)
    spec_q, _ = act_quant_ref("silu_and_mul", h, key, y_scale, numerics="default" if round_product else "hcu")
    assert_bits_equal(q_ref, spec_q, f"the producer vs the spec on the GEMM's output ({device})")
    c = g.one_split(cfg, k)
    assert c == 1
    if input_form == "float":
        quantizer = g.launch.bind_rows(x, x, "identity", key_name, False, FP8)
        call = g.bind_small_m_producing(p, w, ws, b, producer, quantizer, config=cfg)
        if not g.quantizes_float_tiles(cfg, kind):  # float tiles of at most 16 tokens, FP8 in MMA blocks: none bound
            assert call is None
            return
        q = call(x, x_scale, y_scale)
    else:
        call = g.bind_small_m_producing(p, w, ws, b, producer, config=cfg)
        q = call(xq, xs, y_scale)
    what = (f"producing small-M {key_name} {m}x{n}x{k} {cfg} {out_dtype} bias={b is not None} {input_form} "
            f"per_channel={per_channel}")
    assert q.shape == (m, n // 2) and q.dtype == q_ref.dtype, what
    assert_bits_equal(q, q_ref, what)


def quant_ref_for(x, key, scale, device):
    """``x`` quantized by the spec's quantizer (on the GPU: the Triton identity producer, bitwise the same)."""
    from fused_quant.reference import quant_ref

    q, s = quant_ref(x.cpu(), key, scale.cpu())
    return q.to(device), s.reshape(1, 1).to(device)


@pytest.mark.parametrize("why,args,match", [
    ("split", dict(splits=2), "one K split"),
    ("one weight row", dict(BLOCK_N=1, BLOCK_M=1), "an even BLOCK_N; the config has BLOCK_N=1"),
])
def test_producing_needs_one_split_and_gate_up_pairs(why, args, match):
    p = GemmProblem(1, 64, 256, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), False, True, False)
    cfg = dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=64, splits=1, num_warps=4, num_stages=2, **{})
    cfg.update(args)
    with pytest.raises(ValueError, match=match):
        g.SmallMCall(p, cfg, None, (("QUANT", 2),))


def test_producing_declines_a_table_row_of_one_weight_row(monkeypatch):
    """A layer whose nearest table row holds blocks of one weight row (the committed int8 down row at one token,
    nearest for a gate_up of that size) runs the two calls: no gate | up pair fits such a block. It was a
    ZeroDivisionError out of the first one-launch bind; two weight rows a block take it (PRODUCING_CASES)."""
    import types

    monkeypatch.setattr(g, "producing_of", lambda producer, p: (("QUANT", 0),))
    rows = {1: dict(BLOCK_N=1, BLOCK_M=1, BLOCK_K=512, splits=1, num_warps=4, num_stages=1),
            2: dict(BLOCK_N=2, BLOCK_M=1, BLOCK_K=512, splits=1, num_warps=1, num_stages=1)}
    block_n = [1]
    monkeypatch.setattr(g, "small_m_config", lambda *a: (dict(rows[block_n[0]]), ""))
    main = types.SimpleNamespace(fits=lambda dtypes, scalars: True)
    monkeypatch.setattr(g, "_small_m_call", lambda p, key, x_quant, y_quant: types.SimpleNamespace(
        own_scales=False, main=main))
    p = GemmProblem(1, 8192, 16384, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), False, True, False)
    w, ws, producer = torch.zeros(8192, 16384, dtype=torch.int8), torch.ones(8192, 1), types.SimpleNamespace(
        q_dtype=torch.int8)
    assert g.bind_small_m_producing(p, w, ws, None, producer) is None
    block_n[0] = 2
    assert g.bind_small_m_producing(p, w, ws, None, producer) is not None


def test_producing_takes_a_float_input_from_a_table_row_of_one_token_block(monkeypatch):
    """The one-launch call from a float input: a table row at 64 tokens in 16-token blocks leaves it to the producer
    (``quantizes_float_input``), the same row at 16 tokens and a test's explicit config take it."""
    import types

    cfg = dict(BLOCK_N=32, BLOCK_M=16, BLOCK_K=64, splits=1, num_warps=4, num_stages=2)
    monkeypatch.setattr(g, "producing_of", lambda producer, p: (("QUANT", 0),))
    monkeypatch.setattr(g, "quantizer_of", lambda quantizer, p: ("int8_static_tensor", torch.bfloat16))
    monkeypatch.setattr(g, "small_m_config", lambda *a: (dict(cfg), ""))
    bound, fits = [], [True]
    main = types.SimpleNamespace(fits=lambda dtypes, scalars: fits[0])
    monkeypatch.setattr(g, "_small_m_call", lambda p, key, x_quant, y_quant: bound.append((p.m, x_quant))
                        or types.SimpleNamespace(own_scales=False, main=main))
    p = GemmProblem(64, 64, 256, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), False, True, False)
    w, ws = torch.zeros(64, 256, dtype=torch.int8), torch.ones(64, 1)
    producer = types.SimpleNamespace(q_dtype=torch.int8)
    assert 64 in g.PRODUCING_BUCKETS and 16 in g.PRODUCING_BUCKETS
    assert g.bind_small_m_producing(p, w, ws, None, producer, object()) is None
    assert g.bind_small_m_producing(p, w, ws, None, producer) is not None  # a quantized input: one launch
    assert g.bind_small_m_producing(dataclasses.replace(p, m=16), w, ws, None, producer, object()) is not None
    assert g.bind_small_m_producing(p, w, ws, None, producer, object(), config=dict(cfg)) is not None
    x_quant = ("int8_static_tensor", torch.bfloat16)
    assert bound == [(64, None), (16, x_quant), (64, x_quant)]
    fits[0] = False  # a kernel over a block's shared memory (``KernelCall.fits``): the GEMM, then the producer
    assert g.bind_small_m_producing(dataclasses.replace(p, m=16), w, ws, None, producer, object()) is None


def test_producing_only_at_the_measured_buckets(monkeypatch):
    """The table's config binds the one-launch call only at a token count whose bucket is one of
    ``PRODUCING_BUCKETS`` (where the MLP measured it faster); an explicit config (tests, sweeps) always."""
    seen = []
    monkeypatch.setattr(g, "producing_of", lambda producer, p: (("QUANT", 0),))
    monkeypatch.setattr(g, "small_m_config", lambda *a: seen.append(a) or (None, "no row"))
    p32 = GemmProblem(32, 64, 256, "int8", torch.int8, torch.bfloat16, torch.device("cpu"), False, True, False)
    assert 32 not in g.PRODUCING_BUCKETS and g.bind_small_m_producing(p32, None, None, None, object()) is None
    for m in (17, 170, 192):  # the buckets 32 and 192
        assert g.bind_small_m_producing(dataclasses.replace(p32, m=m), None, None, None, object()) is None
    assert seen == []  # refused before the table is read
    for m in (9, 33, 100, 150, 200, 256):  # the buckets 16, 64, 128, 160 and 256: the table's row is asked for
        assert g.bind_small_m_producing(dataclasses.replace(p32, m=m), None, None, None, object()) is None
    assert [a[4] for a in seen] == [9, 33, 100, 150, 200, 256]


# each a change to a good row, and what the loader says of it
_MALFORMED_ROWS = [
    (dict(BLOCK_N=48), "expected BLOCK_N a power of two, got 48"),
    (dict(BLOCK_K=24), "expected BLOCK_K a power of two, got 24"),
    (dict(BLOCK_M=0), "expected a positive integer BLOCK_M, got 0"),
    (dict(BLOCK_M=4), "expected BLOCK_M 1 (no MMA) or BLOCK_M, BLOCK_N and BLOCK_K each at least 16 (an MMA tile), "
                      "got BLOCK_M=4"),
    (dict(BLOCK_N=8), "or BLOCK_M, BLOCK_N and BLOCK_K each at least 16 (an MMA tile), got BLOCK_N=8"),
    (dict(BLOCK_K="256"), "expected a positive integer BLOCK_K, got '256'"),
    (dict(splits=0), "expected a positive integer splits, got 0"),
    (dict(splits=True), "expected a positive integer splits, got True"),
    (dict(num_warps=3), "expected num_warps one of (1, 2, 4, 8, 16, 32), got 3"),
    (dict(num_stages=-1), "expected a positive integer num_stages, got -1"),
    (dict(us=float("nan")), "expected a finite positive time us, got nan"),
    (dict(us=None), "expected a finite positive time us, got None"),
    (dict(torch_all={}), "expected the torch providers' times (torch_all), got {}"),
    (dict(torch_all={"triton_int8": float("inf")}), "expected finite positive torch times, got {'triton_int8': inf}"),
    (dict(n=0), "expected a positive integer n, got 0"),
    (dict(m=3), "expected m one of the buckets"),
    (dict(m=16.0), "expected m one of the buckets"),
    (dict(kind="INT8"), "expected kind fp8 or int8, got 'INT8'"),
    (dict(arch=""), "expected an arch name, got ''"),
    (dict(device=7), "expected a GPU model's name as its device (or none), got 7"),
]


@pytest.mark.parametrize("change,said", _MALFORMED_ROWS, ids=[f"{next(iter(c))}={next(iter(c.values()))!r}"
                                                              for c, _ in _MALFORMED_ROWS])
def test_a_malformed_row_is_refused_as_the_table_is_read(tmp_path, monkeypatch, change, said):
    """A row the small-M GEMM could not launch, or would weigh wrongly against the torch providers, is a ValueError
    naming the file and the row as the table is read: never a config that fails inside the kernel, is clamped, or
    (a NaN time) always wins."""
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": [_table_row(1, 8.0, 9.0), {**_table_row(16, 8.0, 9.0),
                                                                                               **change}]}))
    monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
    with pytest.raises(ValueError) as err:
        g.small_m_config("sm_90", "int8", 4096, 4096, 1)
    assert str(table) in str(err.value) and "row 1" in str(err.value) and said in str(err.value)
    if "torch" not in said:  # the quantizing table's rows carry no torch times: the rest is checked there too
        quantizing = tmp_path / "q.json"  # another path than the GEMM table's: read as the quantizing table
        quantizing.write_text(table.read_text().replace('"torch_all"', '"torch_times_of_no_use"'))
        monkeypatch.setattr(g, "SMALL_M_QUANTIZING_FILE", quantizing)
        with pytest.raises(ValueError, match="row 1"):
            g._swept_row("sm_90", "int8", 4096, 4096, 1, quantizing)


def test_a_table_the_provider_cannot_read_is_named(tmp_path, monkeypatch):
    """Two rows for one problem, a sweep's output copied in place of the installed table (its ``"meta"``), and a
    file that is not JSON: each a ValueError naming the file, never the last row winning or the rows read without
    their arch's meta."""
    cases = [({"metas": {}, "rows": [_table_row(1, 8.0, 9.0), _table_row(1, 7.0, 9.0)]}, "rows 0 and 1 are both int8"),
             ({"meta": {"device": "NVIDIA H200"}, "rows": [_table_row(1, 8.0, 9.0)]}, "is a sweep's output"),
             ([_table_row(1, 8.0, 9.0)], "expected a JSON object with a list of rows, got list"),
             ("{not json", "cannot be read")]
    for i, (data, said) in enumerate(cases):
        table = tmp_path / f"t{i}.json"
        table.write_text(data if isinstance(data, str) else json.dumps(data))
        monkeypatch.setattr(g, "SMALL_M_CONFIG_FILE", table)
        with pytest.raises(ValueError) as err:
            g.small_m_config("sm_90", "int8", 4096, 4096, 1)
        assert str(table) in str(err.value) and said in str(err.value), (said, err.value)
    # one row per problem for each GPU model and the arch: the same problem in the arch's and a model's rows is fine
    g.check_rows([_table_row(1, 8.0, 9.0), _table_row(1, 8.0, 9.0, _MODEL)], "t")


def test_two_shapes_as_near_are_a_tie_that_the_models_own_row_wins(tmp_path):
    """N = 1152 lies as near 768 as 1728 (both 1.5x away): an exact tie, which the GPU model's own row wins whichever
    side it is on (with the ratios' log2 summed in floats one side came out nearer by rounding); N or K of 0 is a
    reason, not a math error."""
    for own, arch in ((768, 1728), (1728, 768)):
        table = tmp_path / f"t{own}.json"
        table.write_text(json.dumps({"metas": {"sm_90": {}}, "rows": [
            _table_row(1, 8.0, 9.0, n=arch, block_n=32), _table_row(1, 8.0, 9.0, _MODEL, n=own, block_n=128)]}))
        row, _ = g._swept_row("sm_90", "int8", 1152, 4096, 1, table, _MODEL)
        assert row["device"] == _MODEL and row["n"] == own
        row, _ = g._swept_row("sm_90", "int8", 1152, 4096, 1, table)  # no model: the arch's row
        assert row["n"] == arch
    for n, k in ((0, 4096), (4096, 0)):
        assert g._swept_row("sm_90", "int8", n, k, 1, table) == (None, f"N and K must be positive, got N={n} K={k}")


def test_sweep_install_refuses_rows_it_cannot_keep_and_leaves_the_table(tmp_path):
    """``install`` refuses, the table as it was: a sweep row the provider would refuse to read, and part of the arch's
    rows its meta describes swept on another GPU model than the rest (rows of two models under the meta of one). Rows
    of new shapes another GPU added are that GPU's (their stamp), not part of the rest: it sweeps them again as it
    will. A sweep of every row the arch has on the other model replaces them all, its meta with them."""
    from benchmarks.sweep_small_m_gemm import install

    table = tmp_path / "table.json"
    before = json.dumps({"metas": {"sm_90": {"device": "NVIDIA H200"}},
                         "rows": [_table_row(1, 8.0, 9.0), _table_row(16, 9.0, 10.0)]}, indent=1) + "\n"
    table.write_text(before)
    sweep = tmp_path / "sweep.json"
    for meta, rows, said in (
            ({"device": "NVIDIA H200"}, [dict(_table_row(1, 7.0, 9.0), num_warps=3)], "expected num_warps one of"),
            ({"device": "NVIDIA H100"}, [_table_row(1, 7.0, 9.0)], "sm_90's rows in")):
        sweep.write_text(json.dumps({"meta": meta, "rows": rows}))
        with pytest.raises(ValueError, match=said):
            install(sweep, table)
        assert table.read_text() == before
        assert not list(tmp_path.glob("*.part"))
    # rows of a new shape only (another model's --model sweep on another GPU): added, each naming where it was
    # swept; the arch's meta stays the one of the rows it describes
    other = {"device": "NVIDIA H100", "date": "2026-12-07"}
    sweep.write_text(json.dumps({"meta": other, "rows": [_table_row(1, 6.0, 9.0, n=11008)]}))
    install(sweep, table)
    got = json.loads(table.read_text())
    assert got["metas"] == {"sm_90": {"device": "NVIDIA H200"}} and len(got["rows"]) == 3
    assert got["rows"][-1]["swept"] == "NVIDIA H100 2026-12-07" and "swept" not in got["rows"][0]
    again = {"device": "NVIDIA H100", "date": "2026-12-08"}  # the H100 sweeps the rows it added again
    sweep.write_text(json.dumps({"meta": again, "rows": [_table_row(1, 5.5, 9.0, n=11008)]}))
    install(sweep, table)
    got = json.loads(table.read_text())
    assert got["metas"] == {"sm_90": {"device": "NVIDIA H200"}} and got["rows"][-1]["us"] == 5.5
    assert got["rows"][-1]["swept"] == "NVIDIA H100 2026-12-08"
    sweep.write_text(json.dumps({"meta": again, "rows": [_table_row(1, 7.0, 9.0)]}))  # one of the H200's two: refused
    with pytest.raises(ValueError, match="from NVIDIA H100, replace 1 of them and 1 would stay as NVIDIA H200"):
        install(sweep, table)
    table.write_text(before)
    sweep.write_text(json.dumps({"meta": other, "rows": [_table_row(1, 7.0, 9.0), _table_row(16, 7.5, 10.0)]}))
    install(sweep, table)
    got = json.loads(table.read_text())
    assert got["metas"] == {"sm_90": other} and [r["us"] for r in got["rows"]] == [7.0, 7.5]


def test_a_sweep_never_writes_over_the_installed_table_or_an_earlier_sweep(tmp_path):
    """``--out`` the package's folder is refused (the sweep's table has the installed table's name); a folder holding
    a sweep is refused unless ``--resume`` goes on with it, and a resume takes only rows measured alike: the same GPU,
    the same mode (search or ``--retime``, from the same ``--seed-from``), the same owner (the arch or
    ``--own-rows``'s model), PDL the same way, the same torch, Triton and CUDA, the same FUSED_QUANT_* variables."""
    from benchmarks.sweep_small_m_gemm import LOG, out_problem, resumed_rows

    assert "is the package's folder" in out_problem(g.SMALL_M_CONFIG_FILE.parent, resume=True)
    assert out_problem(tmp_path, resume=False) == ""
    (tmp_path / LOG).write_text("a line\n")
    assert f"holds a sweep already ({LOG})" in out_problem(tmp_path, resume=False)
    assert out_problem(tmp_path, resume=True) == ""
    path = tmp_path / g.SMALL_M_CONFIG_FILE.name
    now = {"device": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0", "cuda": "12.8", "pdl": True,
           "env": {"FUSED_QUANT_DISABLED_GEMMS": "int_mm_int8"}}
    assert resumed_rows(path, now, None) == ([], "")  # only a log: nothing timed to keep
    rows = [_table_row(1, 8.0, 9.0)]
    path.write_text(json.dumps({"meta": now, "rows": rows}))
    assert resumed_rows(path, now, None) == (rows, "")
    for change, model, said in (
            ({"device": "NVIDIA H100"}, None, "was swept on NVIDIA H200, this GPU is NVIDIA H100"),
            ({"retime": True}, None, "was a search; resume it the same way"),
            ({}, _MODEL, "holds rows of ['None'], this run writes"),
            ({"pdl": False}, None, "was swept with PDL on; FUSED_QUANT_PDL is not so now"),
            ({"torch": "2.12.0", "cuda": "13.0"}, None,
             "was swept with torch 2.11.0, cuda 12.8; this run has torch 2.12.0, cuda 13.0"),
            ({"triton": "3.7.0"}, None, "was swept with triton 3.6.0; this run has triton 3.7.0"),
            ({"env": {"FUSED_QUANT_BACKEND": "torch"}}, None,
             "was swept with FUSED_QUANT_DISABLED_GEMMS int_mm_int8, FUSED_QUANT_BACKEND unset; this run has "
             "FUSED_QUANT_DISABLED_GEMMS unset, FUSED_QUANT_BACKEND torch")):
        got, why = resumed_rows(path, {**now, **change}, model)
        assert got == [] and said in why, why
    path.write_text(json.dumps({"meta": {**now, "retime": True, "seed_from": 128}, "rows": rows}))
    assert resumed_rows(path, {**now, "retime": True, "seed_from": 128}, None) == (rows, "")
    got, why = resumed_rows(path, {**now, "retime": True}, None)
    assert got == [] and "was swept with --seed-from 128; this run has --seed-from unset" in why, why
    path.write_text(json.dumps({"meta": {key: now[key] for key in now if key != "pdl"}, "rows": rows}))
    assert resumed_rows(path, {**now, "pdl": False}, None) == (rows, "")  # a sweep from before PDL was recorded
    path.write_text("{")
    assert "is not a sweep's table" in resumed_rows(path, now, None)[1]


def test_a_resumed_sweep_keeps_its_rows_and_times_none_again(monkeypatch):
    """``sweep`` with the rows of a run cut short keeps them and times nothing they hold (no weights made, no GPU
    asked past the arch): the log says so."""
    from benchmarks import sweep_small_m_gemm as s
    from fused_quant.kernels import launch

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "_cuda_arch", lambda index: "sm_90")
    monkeypatch.setattr(s, "_weights", lambda *a: pytest.fail("a kept row was timed again"))
    before = [dict(_table_row(m, 8.0, 9.0), shape="o") for m in (1, 16)]
    lines = []
    rows = s.sweep(["int8"], {"o": (4096, 4096)}, [1, 16], lines.append, lambda rows: None, before=before)
    assert rows == before and lines == ["int8 o       kept from the run resumed"]

    class Timed(Exception):
        pass

    def weights(*args):
        raise Timed(args[1:3])

    # the same label for another shape (--model, --tp): timed, not taken for the rows kept
    monkeypatch.setattr(s, "_weights", weights)
    with pytest.raises(Timed, match="2048, 4096"):
        s.sweep(["int8"], {"o": (2048, 4096)}, [1, 16], lines.append, lambda rows: None, before=before)


def test_a_sweep_on_rocm_keys_its_rows_as_the_provider_reads_them(monkeypatch):
    """On ROCm torch reports an NVIDIA-like capability (9.4 on an MI300X) while the provider reads the rows under the
    platform's gfx name (``gemm_launch._device_arch``): the sweep keys its rows under that name, and makes its FP8
    weights and activations in the platform's format (e4m3fnuz on gfx94x). Swept here on the CPU: the operands, the
    torch providers' times, the kernel (float64's product) and its timing stood in for."""
    import fused_quant.platforms as platforms
    from benchmarks import sweep_small_m_gemm as s
    from fused_quant.kernels import direct_launch as dl

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 4))
    monkeypatch.setattr(dl, "_HIP", True)
    monkeypatch.setattr(platforms, "current_platform",
                        lambda: types.SimpleNamespace(arch="gfx942", fp8_dtype=torch.float8_e4m3fnuz))
    made = []

    def weights(kind, n, k, copies, fp8_dtype):
        made.append(fp8_dtype)
        return [((torch.randn(n, k) * 4).to(fp8_dtype), torch.rand(n, 1) * 0.01 + 1e-3)]

    def activation(kind, m, k, fp8_dtype):
        made.append(fp8_dtype)
        return (torch.randn(m, k) * 4).to(fp8_dtype), torch.rand(m, 1) * 0.01 + 1e-3, torch.full((1, 1), 0.005)

    def bind_small_m(p, w, ws, bias, cfg):
        return lambda xq, xs: ((xq.double() @ w.double().T) * xs.double() * ws.double().T).to(p.out_dtype)

    monkeypatch.setattr(s, "_weights", weights)
    monkeypatch.setattr(s, "_activation", activation)
    monkeypatch.setattr(s, "torch_times", lambda *args: {g.SCALED_MM_ROW_WISE: 9.0})
    monkeypatch.setattr(s, "graph_us", lambda calls: 8.0)
    monkeypatch.setattr(g, "bind_small_m", bind_small_m)
    rows = s.sweep(["fp8"], {"o": (256, 512)}, [1], lambda line: None, lambda rows: None)
    assert [r["arch"] for r in rows] == [g._device_arch(torch.device("cuda", 0))] == ["gfx942"]
    assert made == [torch.float8_e4m3fnuz] * 2


@pytest.mark.parametrize("node,other", [(torch.float8_e4m3fn, torch.float8_e4m3fnuz),
                                        (torch.float8_e4m3fnuz, torch.float8_e4m3fn)], ids=["nvidia", "gfx942"])
def test_fp8_providers_decline_the_format_the_node_does_not_compute(monkeypatch, node, other):
    """FP8 data of the other format (a layer built with another ``fp8_dtype``, a checkpoint of another node):
    ``torch._scaled_mm`` and the small-M GEMM (both backends' chains) decline it, naming both formats, so the chain
    goes on to the torch backend's FP8 GEMM, exact for both; the node's own format passes this check."""
    import fused_quant.platforms as platforms
    from fused_quant.gemm import gemm_providers

    monkeypatch.setattr(platforms, "current_platform", lambda: types.SimpleNamespace(fp8_dtype=node, has_fp8=True,
                                                                                      arch="sm_90", vendor="nvidia"))
    p = GemmProblem(16, 4096, 4096, "fp8", other, torch.bfloat16, torch.device("cuda"), True, True, False)
    said = (False, f"this node's FP8 GEMMs take {node}, got {other}")
    assert g.scaled_mm_supported(p) == said and g.small_m_supported(p) == said
    for backend in ("triton_fp8", "hip_w8a8"):
        for provider in gemm_providers(backend, "fp8"):
            assert provider.check(p) == said, (backend, provider.name)
    assert g.scaled_mm_supported(dataclasses.replace(p, x_dtype=node)) == (True, "")
