"""Round 17: the per-token silu producer's warps at M = 128..1024 (H = 14336), three turns, the order
reversed in the middle one; q and scales checked bitwise against the heuristic's."""
import statistics, torch
from benchmarks.timing import graph_us
from fused_quant import keys as K
from fused_quant.kernels.launch import launch_act_quant

FP8 = torch.float8_e4m3fn
CFGS = {"heuristic": None, "chunks2048_w16": dict(variant="chunks", CHUNK=2048, num_warps=16),
        "chunks1024_w16": dict(variant="chunks", CHUNK=1024, num_warps=16),
        "rows16384_w32": dict(variant="rows", ROWS=1, BLOCK_N=16384, num_warps=32),
        "rows16384_w16": dict(variant="rows", ROWS=1, BLOCK_N=16384, num_warps=16)}
print(torch.cuda.get_device_name(), torch.__version__)
for key in ("fp8_dynamic_token", "int8_dynamic_token"):
    for m in (128, 192, 256, 384, 512, 1024):
        xs = [torch.randn(m, 2 * 14336, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        call = lambda x, cfg: launch_act_quant(x, "silu_and_mul", K.KEYS[key], None, False, FP8,
                                               config=dict(cfg) if cfg else None)
        ref = [call(x, None) for x in xs]
        times = {name: [] for name in CFGS}
        bad = set()
        for turn in range(3):
            names = list(CFGS) if turn != 1 else list(reversed(CFGS))
            for name in names:
                cfg = CFGS[name]
                if turn == 0:
                    for x, r in zip(xs, ref):
                        q, s = call(x, cfg)
                        if not (torch.equal(q.view(torch.uint8), r[0].view(torch.uint8)) and torch.equal(s, r[1])):
                            bad.add(name)
                times[name].append(graph_us([lambda x=x, cfg=cfg: call(x, cfg) for x in xs]))
        print(f"{key:18s} M={m:5d} " + " | ".join(
            f"{n} {statistics.median(t):6.2f}{' MISMATCH' if n in bad else ''}" for n, t in times.items()), flush=True)
        del xs, ref
