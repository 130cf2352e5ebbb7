"""Round 18 experiment: every stream-K candidate's GPU time beside the table's config (graph replay over weight
copies, as the sweep times), two kernels (main + fix-up, what a captured call runs) and the fused main kernel
(counters made before capture), with each kernel's shared memory, registers and spills."""
import sys, torch
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g, launch
from benchmarks.decode import copies_for, _weights
from benchmarks.sweep_small_m_gemm import SHAPES, STREAM_K_TILES, _activation, _error, error_bound
from benchmarks.timing import graph_us

ROWS = [("int8", "gate_up", 256), ("int8", "down", 256), ("int8", "gate_up", 128), ("fp8", "gate_up", 256),
        ("fp8", "down", 256)]
table = g.config_table(g.SMALL_M_CONFIG_FILE)

def fused_fns(p, cfg, weights, xq, xs):
    c = g._small_m_call(p, g._config_key(cfg))
    fns = []
    for w, ws in weights:
        out = torch.empty(p.m, p.n, dtype=torch.bfloat16, device="cuda")
        part = torch.empty(c.part_shape, dtype=c.acc_dtype, device="cuda")
        cnt = torch.zeros(c.tiles, dtype=torch.int32, device="cuda")
        sc = g.gemm_scalars(p, w)
        fns.append(lambda w=w, ws=ws, out=out, part=part, cnt=cnt, sc=sc: c.fused((xq, w, xs, ws, ws, out, part, cnt), sc))
    return c, fns

for kind, shape, m in ROWS:
    n, k = SHAPES[shape]
    weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
    xq, xs, _ = _activation(kind, m, k)
    p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
    row = table[("sm_90", kind)][(n, k)][m]
    cfgs = [("table", g.row_config(row))]
    for bm, tiles in STREAM_K_TILES.items():
        if bm <= m:
            for bn, bk, warps, stages in tiles:
                for prog in (1, 2):
                    cfgs.append(("sk", dict(BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, splits=1, num_warps=warps,
                                            num_stages=stages, stream_k=prog)))
    print(f"== {kind} {shape} M={m}: table row {row['us']} us, torch {row['torch']} {row['torch_us']} us", flush=True)
    for name, cfg in cfgs:
        try:
            calls = [g.bind_small_m(p, w, ws, None, cfg) for w, ws in weights]
            o = calls[0](xq, xs)
            us = graph_us([lambda c=c: c(xq, xs) for c in calls])
            p32 = GemmProblem(m, n, k, kind, xq.dtype, torch.float32, xq.device, True, True, False)
            w, ws = weights[0]
            err = _error(g.bind_small_m(p32, w, ws, None, cfg)(xq, xs), xq, xs, w, ws)
            line = f"{name:5s} {us:7.2f} us two-kernel  err {err:.1e} (bound {error_bound(kind, k):.1e})"
            if cfg.get("stream_k"):
                c, fns = fused_fns(p, cfg, weights, xq, xs)
                fns[0]()
                fus = graph_us(fns)
                line += f" | fused {fus:7.2f} us | programs {c.reduce_scalars[-1]} tiles {c.tiles}"
            print(line, cfg, flush=True)
        except Exception as exc:
            print(name, "FAILED", type(exc).__name__, str(exc)[:300], cfg, flush=True)
    del weights
    torch.cuda.empty_cache()
# kernel resources of every kernel compiled here
seen = set()
for spec, comp in launch._COMPILED._data.items():
    md = comp.metadata
    key = (comp.name, md.shared, getattr(md, "num_warps", None), getattr(md, "num_stages", None))
    if key in seen:
        continue
    seen.add(key)
    print(f"kernel {comp.name:28s} warps {md.num_warps} stages {md.num_stages} shared {md.shared:7d} regs {comp.n_regs} spills {comp.n_spills}")
