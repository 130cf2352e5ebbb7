"""Round 17: the per-token silu producer at M = 160..320 (H = 14336): the heuristic's chunks vs one row of
16384 lanes with 32 warps, three turns, bits checked."""
import statistics, torch
from benchmarks.timing import graph_us
from fused_quant import keys as K
from fused_quant.kernels.launch import launch_act_quant

FP8 = torch.float8_e4m3fn
CFGS = {"heuristic": None, "rows16384_w32": dict(variant="rows", ROWS=1, BLOCK_N=16384, num_warps=32)}
for key in ("fp8_dynamic_token", "int8_dynamic_token"):
    for m in (160, 224, 256, 288, 320):
        xs = [torch.randn(m, 2 * 14336, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        call = lambda x, cfg: launch_act_quant(x, "silu_and_mul", K.KEYS[key], None, False, FP8,
                                               config=dict(cfg) if cfg else None)
        same = all(torch.equal(call(x, None)[0].view(torch.uint8), call(x, CFGS["rows16384_w32"])[0].view(torch.uint8))
                   for x in xs)
        t = {n: [] for n in CFGS}
        for turn in range(3):
            for n in (CFGS if turn != 1 else list(reversed(CFGS))):
                t[n].append(graph_us([lambda x=x, c=CFGS[n]: call(x, c) for x in xs]))
        print(f"{key:18s} M={m:4d} " + " | ".join(f"{n} {statistics.median(v):6.2f}" for n, v in t.items())
              + ("" if same else " MISMATCH"), flush=True)
        del xs
