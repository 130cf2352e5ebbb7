"""A/B on one machine, the variants interleaved in every round: split-K GEMMs in eager calls as one fused
launch (the committed path) against the main kernel + the epilogue kernel (the path captured calls take,
forced in eager by patching gemm_launch.capturing for that peer's calls). Eager MLP at M = 1, 4, 16 and
host time per QuantLinear(qa) down call at M = 1 (both the split down GEMM)."""
import json, sys
import torch
from fused_quant import QuantLinear, SiluAndMul, maybe_fused_act_quant
from fused_quant.kernels import gemm_launch as g
from benchmarks import decode
from benchmarks.timing import loop_us, host_us

out = sys.argv[1]
orig = g.capturing


def two_kernels(fn):
    def run(*a):
        g.capturing = lambda: True
        try:
            return fn(*a)
        finally:
            g.capturing = orig
    return run


torch.manual_seed(0)
d, h = 4096, 14336
peers = {"bf16": decode._mlp(None, d, h, 2)}
for name, key in decode.MLP_KEYS.items():
    peers[name] = decode._mlp(key, d, h, 2)
res = {"mlp_eager": {}, "host_down": {}}
for m in (1, 4, 16):
    x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
    fns = {"bf16": lambda f=peers["bf16"][0]: f(x)}
    for name in decode.MLP_KEYS:
        f = peers[name][0]
        fns[f"{name} fused"] = lambda f=f: f(x)
        fns[f"{name} 2k"] = two_kernels(lambda f=f: f(x))
    # the same outputs either way
    for name in decode.MLP_KEYS:
        a, b = fns[f"{name} fused"](), fns[f"{name} 2k"]()
        assert torch.equal(a.view(torch.int16), b.view(torch.int16)), (name, m)
    res["mlp_eager"][m] = r = loop_us(fns, target_ms=20, rounds=9)
    print(f"eager M={m}: " + "  ".join(f"{k} {v:.1f}" for k, v in r.items()), flush=True)
act = SiluAndMul()
for name, key in decode.MLP_KEYS.items():
    down = torch.nn.Linear(h, d, bias=False, device="cuda", dtype=torch.bfloat16)
    scale = 0.05 if "static" in name else None
    qdown = QuantLinear.from_float(down, key, scale, name="down")
    hx = torch.randn(1, 2 * h, device="cuda", dtype=torch.bfloat16)
    qa = maybe_fused_act_quant(act, hx, qdown)
    t = {"fused": [], "2k": []}
    for _ in range(5):
        t["fused"].append(host_us(lambda: qdown(qa), 300))
        t["2k"].append(host_us(two_kernels(lambda: qdown(qa)), 300))
    res["host_down"][name] = t
    print(f"host down {name}: fused " + "/".join(f"{v:.1f}" for v in t["fused"]) + "  2k " + "/".join(f"{v:.1f}" for v in t["2k"]), flush=True)
json.dump(res, open(f"{out}/fused_ab.json", "w"), indent=1)
print("\n== eager MLP us (fused / two kernels; bf16) and x bf16")
for m, r in res["mlp_eager"].items():
    print(f"M={m:2d} bf16 {r['bf16']:.1f} | " + "  ".join(
        f"{n} {r[n+' fused']:.1f}/{r[n+' 2k']:.1f} ({r['bf16']/r[n+' fused']:.2f}x/{r['bf16']/r[n+' 2k']:.2f}x)" for n in decode.MLP_KEYS))
for n, t in res["host_down"].items():
    print(f"host down {n}: fused median {sorted(t['fused'])[2]:.1f}  2k median {sorted(t['2k'])[2]:.1f}")
