"""Decode-size benchmarks (GPU): the W8A8 GEMMs and the Llama-3-8B MLP at M = 1..16384, against their peers (another
decoder's with ``fused-quant bench --model CONFIG [--tp N]``: ``benchmarks/models.py``).

``gemm``: every GEMM provider of the chain, the chain's own pick (``QuantLinear``), ``torch._scaled_mm``,
``torch._int_mm`` + epilogue and bf16 ``F.linear`` for Llama-3-8B's four linears, FP8 and int8, at
M in ``GEMM_MS``: GPU time per call replayed from a CUDA graph that cycles through enough copies of the
weight to exceed L2 (so every call streams its weight from HBM, as in a model), weight TB/s and % of
the copy ceiling; each timed in two passes over the peers, the second in the reverse order, the lesser kept.
``mlp``: D = 4096, H = 14336, bf16 vs the three W8A8 keys, at M in ``MLP_MS`` (bf16's MLP is
``down(SiluAndMul()(gate_up(x)))`` in eager torch, its silu and mul separate kernels with a [M, H] product between
them, not a fused silu_and_mul kernel; the W8A8 MLPs fuse act and quantization): ``eager`` is the wall
time per call of back-to-back calls (host included, what a launch-bound caller sees), ``graph`` the
GPU time per call replayed from a CUDA graph, ``sustained`` (from ``SUSTAINED_FROM`` tokens on) the same
replayed back to back for seconds (``timing.sustained_us``: what a server sees at the power cap), ``sqnr_db``
each key's output SQNR against the bf16 MLP of the same weights (``mlp_sqnr``).
"""

from __future__ import annotations

import math
import statistics

import torch
import torch.nn.functional as F

from fused_quant import keys as K

from benchmarks import models, report
from benchmarks.timing import (copy_ceiling, graph_us, graph_us_after_foreign, host_chunks, loop_us, pyplot,
                               save_figure, sustained_us, timed_in_orders, timed_passes, versions)

LLAMA_3_8B = models.default()
SHAPES = LLAMA_3_8B.shapes  # {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
GEMM_MS = (1, 2, 4, 8, 16, 32, 64, 128, 160, 192, 256)  # the small-M table's token counts (gemm_launch.M_BUCKETS)
MLP_MS = (1, 16, 64, 256, 1024, 4096, 16384)
# From here on ``bench mlp`` also times each MLP under a sustained load (``sustained_turns``), for this long a turn
# (``--quick``: half): prefill-sized calls keep a serving GPU busy, and there its power cap sets the clocks
SUSTAINED_FROM, SUSTAINED_S = 1024, 1.5
MLP_KEYS = {"fp8_static": K.kFp8StaticTensorSym, "fp8_token": K.kFp8DynamicTokenSym,
            "int8_token": K.kInt8DynamicTokenSym}
STREAM_BYTES = 256 << 20  # weights cycled per graph: five times the H200's L2


def copies_for(nbytes: int) -> int:
    return max(2, -(-STREAM_BYTES // nbytes))


def _weights(kind: str, n: int, k: int, copies: int, fp8_dtype):
    out = []
    for _ in range(copies):
        if kind == "int8":
            w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        else:
            w = (torch.randn(n, k, device="cuda") * 4).to(fp8_dtype)
        out.append((w, torch.rand(n, 1, device="cuda") * 0.01 + 1e-3))
    return out


def _providers(kind: str) -> dict:
    """Peer name -> (``bind(p, w, ws)`` giving the provider's call ``call(xq, xs)`` for a layer's weight, the
    predicate that says where it runs); ``torch._scaled_mm`` in both of its ways for per-token problems."""
    from fused_quant.kernels import gemm_launch as g

    small_m = (lambda p, w, ws: g.bind_small_m(p, w, ws, None), g.small_m_swept)
    if kind == "fp8":
        ways = {"scaled_mm (row-wise)": g.SCALED_MM_ROW_WISE, "scaled_mm (fp32 + epilogue)": g.SCALED_MM_FP32}
        return {"small_m": small_m, **{
            name: (lambda p, w, ws, way=way: g.bind_scaled_mm(p, w, ws, None, way), g.scaled_mm_supported)
            for name, way in ways.items()}}
    return {"small_m": small_m, "int_mm": (lambda p, w, ws: g.bind_int_mm(p, w, ws, None), g.int_mm_supported),
            "triton_int8": (lambda p, w, ws: g.bind_triton_int8(p, w, ws, None), g.triton_int8_supported)}


def picked_name(p) -> str:
    """The chain's provider for ``p``, with ``torch._scaled_mm``'s way where it is that."""
    from fused_quant.gemm import select_gemm_provider
    from fused_quant.kernels import gemm_launch as g

    name = select_gemm_provider(p)[0].name
    return g.scaled_mm_way(p) if name == "scaled_mm_fp8" else name


def table_arch(index: int) -> str | None:
    """The arch the small-M tables key CUDA device ``index``'s rows on, as the provider reads them
    (``gemm_launch._device_arch``): ``sm_XY`` on NVIDIA, the platform's gfx name on ROCm, where torch reports an
    NVIDIA-like capability (9.4 on an MI300X) that no reader looks up."""
    from fused_quant.kernels import gemm_launch as g

    return g._device_arch(torch.device("cuda", index))


def unswept(model: models.Model, arch: str | None, path=None) -> list[str]:
    """The labels of ``model``'s linears whose (N, K) the small-M table (``path``, by default the package's) holds no
    row of on ``arch``, for either kind: their problems take the configs and provider choices of the nearest shape
    swept at their token bucket."""
    from fused_quant.kernels import gemm_launch as g

    table = g.config_table(g.SMALL_M_CONFIG_FILE if path is None else path)
    swept = {nk for key, shapes in table.items() if isinstance(key, tuple) and key[0] == arch for nk in shapes}
    return [label for label, nk in model.shapes.items() if nk not in swept]


def bench_gemm(quick: bool = False, ms=GEMM_MS, model: models.Model = LLAMA_3_8B,
               ceiling: float | None = None) -> dict:
    from fused_quant import QuantLinear
    from fused_quant.contract import QuantizedActivation
    from fused_quant.gemm import GemmProblem
    from fused_quant.registry import platform_fp8_dtype

    arch = table_arch(torch.cuda.current_device())
    missing = unswept(model, arch)
    if missing:
        print(f"note: {', '.join(f'{label} {model.shapes[label][0]}x{model.shapes[label][1]}' for label in missing)} "
              f"not in the small-M table for {arch}: the nearest swept shapes' configs and provider choices serve "
              "them (python -m benchmarks.sweep_small_m_gemm --model CONFIG --out DIR --install sweeps them)",
              flush=True)
    ceiling = ceiling or copy_ceiling(quick)
    fp8 = platform_fp8_dtype()
    rows = []
    for label, (n, k) in model.shapes.items():
        same_bytes = _copy_us_same_bytes(n * k)
        for kind in ("fp8", "int8"):
            key = K.kFp8DynamicTokenSym if kind == "fp8" else K.kInt8DynamicTokenSym
            wdtype = fp8 if kind == "fp8" else torch.int8
            copies = copies_for(n * k)
            weights = _weights(kind, n, k, copies, fp8)
            layers = [QuantLinear(w, ws, key, out_dtype=torch.bfloat16, name=label) for w, ws in weights]
            bf16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
                    for _ in range(copies_for(2 * n * k))] if kind == "fp8" else None
            for m in ms:
                if kind == "int8":
                    xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
                else:
                    xq = (torch.randn(m, k, device="cuda") * 4).to(wdtype)
                xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
                qa = QuantizedActivation(xq, xs, torch.bfloat16, xq.shape, key)
                p = GemmProblem(m, n, k, kind, wdtype, torch.bfloat16, xq.device, True, True, False)
                calls = {"ours": [lambda lay=lay: lay(qa) for lay in layers]}
                picked = picked_name(p)
                for name, (bind, supported) in _providers(kind).items():
                    if supported(p)[0]:
                        bound = [bind(p, w, ws) for w, ws in weights]  # bound outside the capture
                        calls[name] = [lambda c=c: c(xq, xs) for c in bound]
                if bf16 is not None:
                    xb = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                    calls["bf16"] = [lambda wb=wb: F.linear(xb, wb) for wb in bf16]
                # two passes, the second in the reverse order, the lesser time kept: where the chain picks a torch
                # provider, "ours" and that provider are one kernel timed twice, and a drift of the clocks over a
                # single pass told them apart
                passes = timed_passes(calls, graph_us)
                t = {name: min(us) for name, us in passes.items()}
                # each call after another library's kernel too, as in a decoder (no PDL overlap with the call before)
                after = {name: min(us) for name, us in timed_passes(calls, graph_us_after_foreign).items()}
                tbps, pct = _rates(t, n * k, ceiling)
                tbps_after, pct_after = _rates(after, n * k, ceiling)
                row = {"shape": label, "kind": kind, "M": m, "N": n, "K": k, "picked": picked, "us": t,
                       "us_passes": passes, "weight_TBps": tbps, "pct_ceiling": pct,
                       "us_after_foreign": after, "weight_TBps_after_foreign": tbps_after,
                       "pct_ceiling_after_foreign": pct_after}
                # a device copy moving the weight's bytes (half read, half written) in one kernel: the
                # ceiling at this size, ramp and tail included
                row["copy_same_bytes_us"] = same_bytes
                row["pct_same_bytes_copy"] = 100 * same_bytes / t["ours"]
                row["speedup_vs_best_other"] = report.speedup_vs_best_other(row)
                rows.append(row)
                print(f"gemm {kind:4s} {label:7s} M={m:4d} ours({picked}) {t['ours']:7.1f} us "
                      f"{tbps['ours']:.2f} TB/s ({row['pct_ceiling']['ours']:.0f}% of copy, "
                      f"{row['pct_same_bytes_copy']:.0f}% of a same-bytes copy; after a foreign kernel "
                      f"{after['ours']:.1f} us, {tbps_after['ours']:.2f} TB/s)  "
                      + "  ".join(f"{name} {v:.1f}" for name, v in t.items() if name != "ours"), flush=True)
            del layers, weights, bf16
            torch.cuda.empty_cache()
    fits = stream_fit(rows)
    for f in fits:
        print(f"fit {f['kind']:4s} M={f['M']:4d} {f['peer']:5s}: {f['fixed_us']:5.2f} us + weight bytes at "
              f"{f['stream_TBps']:.2f} TB/s (worst residual {f['worst_residual_us']:.2f} us); {TARGET_TBPS} TB/s "
              + _reach(f['bytes_for_3_6_TBps']), flush=True)
    return {"ceiling_GBps": ceiling, "versions": versions(), "model": model.name, "unswept": missing, "rows": rows,
            "fit": fits}


def _rates(times: dict[str, float], weights: int, ceiling: float) -> tuple[dict, dict]:
    """Each peer's weight TB/s over its microseconds (bf16 streams two bytes a weight, the rest one) and that rate's
    percentage of the copy ceiling (GB/s)."""
    tbps = {name: weights * (2 if name == "bf16" else 1) / (us * 1e-6) / 1e12 for name, us in times.items()}
    return tbps, {name: 100 * v * 1e3 / ceiling for name, v in tbps.items()}


def _reach(nbytes: float | None) -> str:
    return ("at no weight size (the stream rate is below it)" if nbytes is None
            else f"from {nbytes / 1e6:.0f} MB of weight")


# The weight rate the decode GEMMs aim at, M = 1-16 (the copy ceiling's 85%): stream_fit's bytes_for_3_6_TBps
TARGET_TBPS = 3.6


def stream_fit(rows: list[dict], peers: tuple[str, ...] = ("ours", "copy")) -> list[dict]:
    """Per (kind, M) and peer (``ours``: the chain's pick; ``copy``: the same-bytes copy), the least-squares line
    ``us = fixed_us + weight_bytes / stream rate`` through the four shapes' times: what a call costs whatever
    its size (launch, ramp, tail, epilogue) and the rate at which it then streams. ``bytes_for_3_6_TBps``: the
    weight size from which that line reaches ``TARGET_TBPS`` (None where its rate is below it), which says
    whether a shape can reach it at all with this fixed cost."""
    fits = []
    for kind, m in dict.fromkeys((r["kind"], r["M"]) for r in rows):
        group = [r for r in rows if r["kind"] == kind and r["M"] == m]
        for peer in peers:
            pts = [(r["N"] * r["K"], r["us"]["ours"] if peer == "ours" else r.get("copy_same_bytes_us"))
                   for r in group]
            pts = [(x, y) for x, y in pts if y is not None]
            if len({x for x, _ in pts}) < 2:
                continue
            mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
            slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
            if slope <= 0:
                continue  # no stream rate in these times
            fixed = my - slope * mx
            rate = 1 / slope  # bytes per us
            per_us_target = TARGET_TBPS * 1e6
            need = fixed / (1 / per_us_target - slope) if rate > per_us_target else None
            fits.append({"kind": kind, "M": m, "peer": peer, "fixed_us": fixed, "stream_TBps": rate / 1e6,
                         "worst_residual_us": max(abs(y - fixed - slope * x) for x, y in pts),
                         "bytes_for_3_6_TBps": max(need, 0.0) if need is not None else None, "shapes": len(pts)})
    return fits


def _copy_us_same_bytes(nbytes: int) -> float:
    """GPU microseconds of one device copy that moves ``nbytes`` (``nbytes / 2`` read and written),
    replayed from a graph cycling through buffers beyond L2, as the GEMMs' weights are."""
    half = nbytes // 2
    pairs = [(torch.empty(half, dtype=torch.uint8, device="cuda").random_(),  # random bits, as the weights hold
              torch.empty(half, dtype=torch.uint8, device="cuda")) for _ in range(copies_for(nbytes))]
    return graph_us([lambda src=src, dst=dst: dst.copy_(src) for src, dst in pairs])


def _mlp(key: K.QuantKey | None, d: int, h: int, copies: int, device: str = "cuda"):
    """``copies`` MLPs (bf16 when ``key`` is None), each ``x -> down(silu_mul(gate_up(x)))``, their weights held as
    a server holds them (``host_calls``' too): bf16's eager calls record no autograd graph (its eager time was
    inflated by it, and so were the eager speed-ups)."""
    from torch import nn

    from fused_quant import QuantLinear, SiluAndMul, linear_act_quant

    act = SiluAndMul()
    fns = []
    for _ in range(copies):
        gate_up = nn.Linear(d, 2 * h, bias=False, device=device, dtype=torch.bfloat16).requires_grad_(False)
        down = nn.Linear(h, d, bias=False, device=device, dtype=torch.bfloat16).requires_grad_(False)
        if key is None:
            fns.append(lambda x, gate_up=gate_up, down=down: down(act(gate_up(x))))
            continue
        scale = 0.05 if K.is_static(key) else None
        qgu = QuantLinear.from_float(gate_up, key, scale, name="gate_up")
        qdown = QuantLinear.from_float(down, key, scale, name="down")
        del gate_up, down
        fns.append(lambda x, qgu=qgu, qdown=qdown: qdown(linear_act_quant(qgu, x, act, qdown)))
    return fns


def sqnr_db(ref: torch.Tensor, out: torch.Tensor) -> float:
    """``10 log10(sum ref^2 / sum (out - ref)^2)`` in float64: +inf where ``out`` equals a finite ``ref``, -inf
    for a zero ``ref`` and another ``out``, NaN where either holds a non-finite value (no SQNR there)."""
    ref, out = ref.double(), out.double()
    noise = float((out - ref).pow(2).sum())
    signal = float(ref.pow(2).sum())
    if not (math.isfinite(noise) and math.isfinite(signal)):
        return math.nan
    if noise == 0:
        return math.inf
    return -math.inf if signal == 0 else 10 * math.log10(signal / noise)


def draw_order(ms) -> list[int]:
    """The token counts whose inputs ``mlp_sqnr`` draws, in order: ``MLP_MS`` up to the last of ``ms`` among them,
    then the rest of ``ms`` (counts a full run does not time)."""
    canon = [m for m in MLP_MS if m <= max((m for m in ms if m in MLP_MS), default=0)]
    return canon + [m for m in ms if m not in MLP_MS]


def mlp_sqnr(ms=MLP_MS, keys=MLP_KEYS, d: int = LLAMA_3_8B.d, h: int = LLAMA_3_8B.h) -> dict[int, dict[str, float]]:
    """``{M: {key: dB}}``: the output SQNR of each key's MLP against the bf16 MLP with the same float weights
    (``nn.Linear``'s initialization, seed 1) on a fresh ``randn`` input per M (a generator of another seed:
    inputs drawn from the weights' random stream would repeat their bits), drawn in ``MLP_MS``'s order whichever
    token counts are asked for, so that a run of some of them sees the inputs a full run sees. Static keys' input scales are
    calibrated once, on a batch of 256 tokens, as ``absmax / the format's max`` of each layer's input.
    The global RNG (CPU and every GPU's) is left as it was."""
    with torch.no_grad(), torch.random.fork_rng(devices=range(torch.cuda.device_count())):
        return _mlp_sqnr(ms, keys, d, h)


def _mlp_sqnr(ms, keys, d: int, h: int) -> dict[int, dict[str, float]]:
    from torch import nn

    from fused_quant import QuantLinear, SiluAndMul, linear_act_quant
    from fused_quant.registry import platform_fp8_dtype

    torch.manual_seed(1)
    gate_up = nn.Linear(d, 2 * h, bias=False, device="cuda", dtype=torch.bfloat16)
    down = nn.Linear(h, d, bias=False, device="cuda", dtype=torch.bfloat16)
    gen = torch.Generator(device="cuda").manual_seed(2)
    fp8_max = torch.finfo(platform_fp8_dtype()).max
    act = SiluAndMul()
    calib = torch.randn(256, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    hidden = act(gate_up(calib))
    layers = {}
    for name, key in keys.items():
        qmax = (fp8_max if K.is_fp8(key) else 127.0) if K.is_static(key) else None
        sx = float(calib.abs().max()) / qmax if qmax else None
        sh = float(hidden.abs().max()) / qmax if qmax else None
        layers[name] = (QuantLinear.from_float(gate_up, key, sx, name="gate_up"),
                        QuantLinear.from_float(down, key, sh, name="down"))
    out = {}
    for m in draw_order(ms):
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        if m not in ms:
            continue
        ref = down(act(gate_up(x)))
        out[m] = {name: sqnr_db(ref, qd(linear_act_quant(qgu, x, act, qd))) for name, (qgu, qd) in layers.items()}
    return out


def graph_turns(peers: dict, calls: int, time_of=None) -> dict[str, float]:
    """Each peer's median ``graph_us`` (or ``time_of``, e.g. ``graph_us_after_foreign``) over as many turns as there
    are peers, the order rotated each turn so every peer is timed first once: a GPU that reaches its power cap in
    the eager loops clocks lower while it stays there (an H100 at 1425-1455 MHz and 659-693 W,
    benchmarks/RESULTS.md, thirty-ninth round), and a fixed order would time the last peer at the lowest clocks."""
    names = list(peers)
    time_of = time_of or graph_us
    times = timed_in_orders(peers, lambda fns: time_of(fns, calls=calls),
                            [names[turn:] + names[:turn] for turn in range(len(names))])
    return {name: statistics.median(t) for name, t in times.items()}


def mlp_graph_calls(m: int) -> int:
    """MLP calls per captured graph at ``m`` tokens, for the short and the sustained replays alike."""
    return 4 if m >= 4096 else 8


def sustained_turns(peers: dict, calls: int, seconds: float) -> dict[str, float]:
    """Each peer's ``sustained_us`` in two turns, the second in the reverse order, their mean: one power state
    carries over into the next peer's first blocks, which ``settled_median`` leaves out."""
    names = list(peers)
    times = timed_in_orders(peers, lambda fns: sustained_us(fns, calls, seconds), (names, names[::-1]))
    return {name: statistics.mean(t) for name, t in times.items()}


def bench_mlp(quick: bool = False, ms=MLP_MS, keys=MLP_KEYS, model: models.Model = LLAMA_3_8B,
              sustained_s: float | None = None) -> dict:
    """The MLP rows (module docstring); ``sustained_s``: seconds of each sustained turn (default ``SUSTAINED_S``,
    half of it with ``quick``; 0: none)."""
    if sustained_s is None:
        sustained_s = SUSTAINED_S / 2 if quick else SUSTAINED_S
    d, h = model.d, model.h
    torch.manual_seed(0)
    peers = {"bf16": _mlp(None, d, h, 2)}
    for name, key in keys.items():
        peers[name] = _mlp(key, d, h, 2)
    sqnr = mlp_sqnr(ms, keys, d, h)
    rows, inputs = [], {}
    for m in ms:
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        eager = loop_us({name: (lambda fns=fns: fns[0](x)) for name, fns in peers.items()},
                        target_ms=20 if quick else 40, rounds=3 if quick else 7)
        replayed = {name: [lambda f=f: f(x) for f in fns] for name, fns in peers.items()}
        graph = graph_turns(replayed, calls=mlp_graph_calls(m))
        # each MLP call after another library's kernel too, as after a decoder's RMSNorm (no PDL overlap)
        after = graph_turns(replayed, calls=mlp_graph_calls(m), time_of=graph_us_after_foreign)
        row = {"M": m, "eager_us": eager, "graph_us": graph, "sqnr_db": sqnr[m],
               "eager_vs_bf16": vs_bf16(eager),
               "graph_vs_bf16": vs_bf16(graph),
               "graph_after_foreign_us": after, "graph_after_foreign_vs_bf16": vs_bf16(after)}
        rows.append(row)
        inputs[m] = x
        print(f"mlp M={m:6d} " + "  ".join(f"{k_} eager {eager[k_]:8.1f} graph {graph[k_]:8.1f}" for k_ in peers)
              + "  | graph x" + "/".join(f"{v:.2f}" for v in row["graph_vs_bf16"].values())
              + " (after a foreign kernel x" + "/".join(f"{v:.2f}" for v in row["graph_after_foreign_vs_bf16"].values())
              + ")"
              + "  eager x" + "/".join(f"{v:.2f}" for v in row["eager_vs_bf16"].values())
              + "  SQNR dB " + "/".join(f"{v:.2f}" for v in sqnr[m].values()), flush=True)
    sustained_rows(rows, peers, inputs, sustained_s)
    return {"versions": versions(), "model": model.name, "d": d, "h": h, "rows": rows}


def vs_bf16(us: dict[str, float]) -> dict[str, float]:
    """Each key's speed-up over bf16 from its time in ``us`` (``report.ratio``: a failed timing is no number)."""
    return {key: report.ratio(us["bf16"], v) for key, v in us.items() if key != "bf16"}


def sustained_rows(rows: list[dict], peers: dict, inputs: dict, seconds: float) -> None:
    """Each row from ``SUSTAINED_FROM`` tokens on gets its peers' ``sustained_turns`` (``sustained_us``,
    ``sustained_vs_bf16``, ``sustained_s``), the calls made on ``inputs[M]``; none where ``seconds`` is 0. Run after
    every token count's eager and short graph timings, so that the seconds at the power cap do not precede them."""
    for row in rows:
        m = row["M"]
        if seconds <= 0 or m < SUSTAINED_FROM:
            continue
        x = inputs[m]
        sus = sustained_turns({name: [lambda f=f, x=x: f(x) for f in fns] for name, fns in peers.items()},
                              calls=mlp_graph_calls(m), seconds=seconds)
        row.update(sustained_us=sus, sustained_s=seconds,
                   sustained_vs_bf16=vs_bf16(sus))
        print(f"mlp M={m:6d} sustained " + "  ".join(f"{k_} {v:8.1f}" for k_, v in sus.items())
              + "  | sustained x" + "/".join(f"{v:.2f}" for v in row["sustained_vs_bf16"].values()), flush=True)


def plot_gemm(result: dict, path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    labels = list(dict.fromkeys(r["shape"] for r in result["rows"])) or list(SHAPES)
    fig, axes = plt.subplots(2, len(labels), figsize=(5 * len(labels), 8), sharey=True, squeeze=False)
    for row_axes, kind in zip(axes, ("fp8", "int8")):
        for ax, label in zip(row_axes, labels):
            rows = [r for r in result["rows"] if r["shape"] == label and r["kind"] == kind]
            peers = dict.fromkeys(p for r in rows for p in r["weight_TBps"])
            for peer in peers:
                timed = [r for r in rows if peer in r["weight_TBps"]]
                ax.plot([r["M"] for r in timed], [r["weight_TBps"][peer] for r in timed], marker="o", label=peer)
            after = [r for r in rows if "ours" in r.get("weight_TBps_after_foreign", {})]
            if after:  # ours, each call after another library's kernel (no PDL overlap with the call before)
                ax.plot([r["M"] for r in after], [r["weight_TBps_after_foreign"]["ours"] for r in after], marker=".",
                        ls="--", color="C0", label="ours after a foreign kernel")
            ax.axhline(result["ceiling_GBps"] / 1e3, color="k", ls="--", label="copy ceiling")
            same = [r["copy_same_bytes_us"] for r in rows if "copy_same_bytes_us" in r]
            if same:  # a copy of the weight's bytes in one kernel: the ceiling at this size
                ax.axhline(rows[0]["N"] * rows[0]["K"] / (same[0] * 1e-6) / 1e12, color="gray", ls=":",
                           label="copy of the 8-bit weight's bytes")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{kind} {label} (N={rows[0]['N']}, K={rows[0]['K']})" if rows else label)
            ax.set_xlabel("M (tokens)")
        row_axes[0].set_ylabel("weight TB/s")
        row_axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def plot_mlp(result: dict, path: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, mode in zip(axes, ("graph", "eager")):
        rows = result["rows"]
        for peer in rows[0][f"{mode}_vs_bf16"]:
            (line,) = ax.plot([r["M"] for r in rows], [r[f"{mode}_vs_bf16"][peer] for r in rows], marker="o",
                              label=peer)
            for column, marker, ls, what in (("sustained_vs_bf16", "s", ":", "sustained"),
                                             ("graph_after_foreign_vs_bf16", ".", "--", "after a foreign kernel")):
                more = [r for r in rows if peer in r.get(column, {})] if mode == "graph" else []
                if more:
                    ax.plot([r["M"] for r in more], [r[column][peer] for r in more], marker=marker, ls=ls,
                            color=line.get_color(), label=f"{peer} ({what})")
        ax.axhline(1.0, color="k", ls="--", label="bf16")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{result.get('model', LLAMA_3_8B.name)} MLP, {mode}: speedup vs bf16")
        ax.set_xlabel("M (tokens)")
    return save_figure(fig, axes[0], path)


def host_calls(keys=MLP_KEYS, m: int = 1, *, d: int = LLAMA_3_8B.d, h: int = LLAMA_3_8B.h,
               device: str = "cuda") -> tuple[dict, dict]:
    """The decode calls whose host cost ``bench_host`` times (at M = 1) and ``benchmarks/profile_host.py``
    profiles, at M tokens with Llama-3-8B's MLP shapes (``d``, ``h``; other shapes and ``device`` for tests):
    ``({"bf16" | key name: {call name: fn}}, {key name: (gate_up, down)})``. Per key: each producer call, each
    QuantLinear call (given a QuantizedActivation, and given the bf16 tensor: quantizer + GEMM), the whole MLP,
    and the same QuantLinear calls through the checked path (nothing bound: every check every call)."""
    from torch import nn

    from fused_quant import QuantLinear, SiluAndMul, maybe_fused_act_quant

    act = SiluAndMul()
    torch.manual_seed(0)
    gate_up = nn.Linear(d, 2 * h, bias=False, device=device, dtype=torch.bfloat16)
    down = nn.Linear(h, d, bias=False, device=device, dtype=torch.bfloat16)
    # held as a server holds them: no timed call records autograd (bf16's neither), and the producers refuse an
    # input that requires grad
    gate_up.requires_grad_(False), down.requires_grad_(False)
    x = torch.randn(m, d, device=device, dtype=torch.bfloat16)
    hx = gate_up(x)
    calls = {"bf16": {"linear gate_up": lambda: gate_up(x), "mlp": lambda: down(act(gate_up(x)))}}
    layers = {}
    for name, key in keys.items():
        scale = 0.05 if K.is_static(key) else None
        qgu = QuantLinear.from_float(gate_up, key, scale, name="gate_up")
        qdown = QuantLinear.from_float(down, key, scale, name="down")
        qa = maybe_fused_act_quant(act, hx, qdown)
        qx = qgu._activation(x, None)
        calls[name] = {
            "producer silu_mul": lambda qdown=qdown: maybe_fused_act_quant(act, hx, qdown),
            "QuantLinear(qa) down": lambda qdown=qdown, qa=qa: qdown(qa),
            "QuantLinear(qa) gate_up": lambda qgu=qgu, qx=qx: qgu(qx),
            "QuantLinear(x) gate_up": lambda qgu=qgu: qgu(x),
            "mlp": lambda qgu=qgu, qdown=qdown: qdown(maybe_fused_act_quant(act, qgu(x), qdown)),
            "checked QuantLinear(qa) down": lambda qdown=qdown, qa=qa: qdown._checked_forward(qa, None, None),
            "checked QuantLinear(x) gate_up": lambda qgu=qgu: qgu._checked_forward(x, None, None),
        }
        layers[name] = (qgu, qdown)
    return calls, layers


def bench_host(quick: bool = False, keys=MLP_KEYS, model: models.Model = LLAMA_3_8B) -> dict:
    """Host cost per call at M = 1 of each of ``host_calls``, and bf16's: the mean over chunks of 100 calls
    (``us_per_call``, as the issue defines it) and the chunks' median (``us_per_call_chunk_median``); a line shows
    the median too where the mean is over 1.2 times it (a noisy host while that call was timed)."""
    n = 300 if quick else 1000
    calls, layers = host_calls(keys, d=model.d, h=model.h)
    rows, medians = {}, {}
    for name, fns in calls.items():
        rows[name], medians[name], shown = {}, {}, []
        for call, fn in fns.items():
            chunks = host_chunks(fn, n)
            rows[name][call], medians[name][call] = sum(chunks) / len(chunks), statistics.median(chunks)
            shown.append(f"{call} {_host_figure(rows[name][call], medians[name][call])}")
        providers = ""
        if name in layers:
            rows[name]["providers"] = {layer.name: next(iter(layer._bound.values())).gemm.provider.name
                                       for layer in layers[name]}
            providers = f"  {rows[name]['providers']}"
        print(f"host M=1 {name}: " + "  ".join(shown) + f" us/call{providers}", flush=True)
    return {"versions": versions(), "model": model.name, "calls": n, "M": 1, "us_per_call": rows,
            "us_per_call_chunk_median": medians}


def _host_figure(mean: float, median: float) -> str:
    return f"{mean:.1f}" + (f" (chunk median {median:.1f})" if mean > 1.2 * median else "")
