"""Next round: int8 / FP8 small-M GEMMs at M = 1..256 (incl. 192, 224, 240) with the committed kernel and with
tokens past M reading rows rm % M (.scratch/rm_mod_m.patch applied by the call script between the two halves)."""
import sys, torch
from benchmarks.decode import copies_for, _weights
from benchmarks.timing import graph_us
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

tag = sys.argv[1]
for kind in ("int8", "fp8"):
    for label, (n, k) in (("gate_up", (28672, 4096)), ("down", (4096, 14336))):
        weights = _weights(kind, n, k, copies_for(n * k), torch.float8_e4m3fn)
        line = f"{tag} {kind} {label}"
        for m in (1, 4, 9, 16, 48, 100, 192, 224, 240, 256):
            if kind == "int8":
                xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            else:
                xq = (torch.randn(m, k, device="cuda") * 4).to(torch.float8_e4m3fn)
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            p = GemmProblem(m, n, k, kind, xq.dtype, torch.bfloat16, xq.device, True, True, False)
            row, _ = g._swept_row("sm_90", kind, n, k, m)  # the bucket's config, whoever the chain picks
            cfg = {f: row[f] for f in g.CONFIG_FIELDS}
            calls = [g.bind_small_m(p, w, ws, None, cfg) for w, ws in weights]
            line += f" | M={m} {graph_us([lambda c=c: c(xq, xs) for c in calls]):6.1f}"
        print(line, flush=True)
        del weights
