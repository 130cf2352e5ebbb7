"""Twentieth round: the small-M GEMM's grid with token blocks on axis 0 (the programs of one weight tile launched
next to each other, so that a second token block may read the tile from L2) against the committed order (N blocks
on axis 0). int8 / FP8 gate_up and down at M = 100-256, the bucket's config and configs of several token blocks."""
import hashlib, json, sys, torch
from benchmarks.decode import copies_for, _weights
from benchmarks.timing import graph_us
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

tag, out = sys.argv[1], sys.argv[2]
C = lambda bn, bm, bk, s, w, st: dict(BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, splits=s, num_warps=w, num_stages=st)
EXTRA = {"gate_up": [C(128, 64, 128, 1, 4, 4), C(128, 128, 128, 1, 8, 3), C(64, 128, 128, 1, 4, 4)],
         "down": [C(64, 64, 128, 2, 4, 4), C(64, 128, 256, 2, 4, 4), C(128, 64, 128, 2, 4, 4)]}
bits = {}
torch.manual_seed(0)
for kind in ("int8", "fp8"):
    for label, (n, k) in (("gate_up", (28672, 4096)), ("down", (4096, 14336))):
        weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
        for m in (100, 160, 192, 256):
            if kind == "int8":
                xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            else:
                xq = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
            row, _ = g._swept_row("sm_90", kind, n, k, m)
            cfgs = [{f: row[f] for f in g.CONFIG_FIELDS}] + EXTRA[label]
            line = f"{tag} {kind:4s} {label:7s} M={m:3d}"
            for i, cfg in enumerate(cfgs):
                calls = [g.bind_small_m(p, w, ws, None, cfg) for w, ws in weights]
                o = calls[0](xq, xs)
                bits[f"{kind} {label} {m} {i}"] = hashlib.sha256(o.view(torch.int16).cpu().numpy().tobytes()).hexdigest()
                us = graph_us([lambda c=c: c(xq, xs) for c in calls])
                line += f" | {'row' if i == 0 else 'c%d' % i} bm{cfg['BLOCK_M']} bn{cfg['BLOCK_N']} {us:6.1f}"
            print(line, flush=True)
        del weights
        torch.cuda.empty_cache()
json.dump(bits, open(out, "w"), indent=0)
