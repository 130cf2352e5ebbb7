"""Host time per eager per-token producer call at M = 1 (silu_and_mul, H = 14336): with sm_90's token_split
(the bound launch also holds a captured plan, so each eager call asks capturing()) against it off."""
import dataclasses, json, sys
import torch
import fused_quant
from fused_quant import fused_act_quant, keys as K
from fused_quant.kernels import heuristics
from benchmarks.timing import host_us

base = heuristics.CONFIGS["sm_90"]
x = torch.randn(1, 2 * 14336, device="cuda", dtype=torch.bfloat16)
res = {}
for turn in range(5):
    for name, split in (("split", base.token_split), ("off", (0, 0, 0, 0))):
        heuristics.CONFIGS["sm_90"] = dataclasses.replace(base, token_split=split)
        fused_quant.reset()
        for kn, key in (("fp8_token", K.kFp8DynamicTokenSym), ("int8_token", K.kInt8DynamicTokenSym)):
            fn = lambda key=key: fused_act_quant("silu_and_mul", x, key)
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            res.setdefault(f"{kn} {name}", []).append(host_us(fn, 1000))
heuristics.CONFIGS["sm_90"] = base
json.dump(res, open(f"{sys.argv[1]}/host_ab.json", "w"), indent=1)
for k, v in res.items():
    print(f"{k:18s} median {sorted(v)[2]:.2f} us  samples " + " ".join(f"{u:.2f}" for u in v))
