"""Fifty-sixth round, run 2 (its last step): graph replays timed with the stream idle before each start event (as
every round before this one) and behind ``timing.hold_stream`` (this round's timing), in alternating turns on one machine:
the MLP at 1 / 16 / 64 tokens (bf16 and the three keys, 8 calls a graph) and o (4096 x 4096) at 1 / 16 tokens
(FP8 per-token QuantLinear and bf16 F.linear, 8 copies a graph)."""
import statistics

import torch
import torch.nn.functional as F

from benchmarks import decode, timing
from fused_quant import QuantLinear
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.registry import platform_fp8_dtype

hold = timing.hold_stream


def timed(peers: dict, calls: int, turns: int = 4) -> dict:
    """{(peer, held): median us} over ``turns`` turns, each timing every peer idle then held (held first on odd
    turns), the peers in an order rotated each turn."""
    out = {}
    names = list(peers)
    for turn in range(turns):
        order = names[turn % len(names):] + names[:turn % len(names)]
        for held in ((False, True) if turn % 2 == 0 else (True, False)):
            timing.hold_stream = hold if held else (lambda: None)
            for name in order:
                out.setdefault((name, held), []).append(timing.graph_us(peers[name], calls=calls))
    timing.hold_stream = hold
    return {k: statistics.median(v) for k, v in out.items()}


torch.manual_seed(0)
d, h = 4096, 14336
mlps = {"bf16": decode._mlp(None, d, h, 2)}
for name, key in decode.MLP_KEYS.items():
    mlps[name] = decode._mlp(key, d, h, 2)
lines = []
for m in (1, 16, 64):
    x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
    t = timed({name: [lambda f=f: f(x) for f in fns] for name, fns in mlps.items()}, calls=8)
    for name in mlps:
        idle, held = t[(name, False)], t[(name, True)]
        ratio = "" if name == "bf16" else (f"  x bf16 {t[('bf16', False)] / idle:.3f} -> "
                                           f"{t[('bf16', True)] / held:.3f}")
        lines.append(f"mlp M={m:3d} {name:10s} idle {idle:7.2f} us  held {held:7.2f} us  "
                     f"({idle - held:+.2f}){ratio}")
        print(lines[-1], flush=True)
del mlps
torch.cuda.empty_cache()
n = k = 4096
fp8 = platform_fp8_dtype()
key = K.kFp8DynamicTokenSym
layers = [QuantLinear(w, ws, key, out_dtype=torch.bfloat16, name="o")
          for w, ws in decode._weights("fp8", n, k, decode.copies_for(n * k), fp8)]
bf16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(decode.copies_for(2 * n * k))]
for m in (1, 16):
    xq = (torch.randn(m, k, device="cuda") * 4).to(fp8)
    xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
    qa = QuantizedActivation(xq, xs, torch.bfloat16, xq.shape, key)
    xb = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    t = timed({"ours": [lambda lay=lay: lay(qa) for lay in layers],
               "bf16": [lambda wb=wb: F.linear(xb, wb) for wb in bf16]}, calls=max(len(layers), 8))
    for name, nbytes in (("ours", n * k), ("bf16", 2 * n * k)):
        idle, held = t[(name, False)], t[(name, True)]
        lines.append(f"o fp8 M={m:3d} {name:5s} idle {idle:6.2f} us ({nbytes / idle / 1e6:.2f} TB/s)  held "
                     f"{held:6.2f} us ({nbytes / held / 1e6:.2f} TB/s)  ({idle - held:+.2f})")
        print(lines[-1], flush=True)
print("\n".join(["", "summary"] + lines))
