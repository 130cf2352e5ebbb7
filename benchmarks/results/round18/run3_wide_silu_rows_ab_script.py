"""Round 18: sm_90's wide per-token silu rows (heuristics.silu_token_wide_rows) on and off, in turns: the
producer alone (H = 14336) and the Llama-3-8B MLP replayed from a CUDA graph; bits compared on vs off."""
import dataclasses, statistics, torch
import fused_quant
from fused_quant import keys as K
from fused_quant.kernels import heuristics
from fused_quant.kernels.launch import launch_act_quant
from benchmarks.decode import _mlp, MLP_KEYS
from benchmarks.timing import graph_us

FP8 = torch.float8_e4m3fn
ON = heuristics.CONFIGS["sm_90"]
OFF = dataclasses.replace(ON, silu_token_wide_rows=(0, 0, 0))
def use(cfg):
    heuristics.CONFIGS["sm_90"] = cfg
    fused_quant.reset()
print(torch.cuda.get_device_name(), torch.__version__, "on:", ON.silu_token_wide_rows)
for key in ("fp8_dynamic_token", "int8_dynamic_token"):
    for m in (192, 224, 256, 288):
        xs = [torch.randn(m, 2 * 14336, device="cuda", dtype=torch.bfloat16) for _ in range(8)]
        call = lambda x: launch_act_quant(x, "silu_and_mul", K.KEYS[key], None, False, FP8)
        t, bits = {"off": [], "on": []}, {}
        for turn in range(3):
            for name in (("off", "on") if turn != 1 else ("on", "off")):
                use(ON if name == "on" else OFF)
                if turn == 0:
                    bits[name] = [tuple(o.clone() for o in call(x)[:2]) for x in xs[:2]]
                t[name].append(graph_us([lambda x=x: call(x) for x in xs]))
        same = all(torch.equal(a.view(torch.uint8) if a.dtype == FP8 else a, b.view(torch.uint8) if b.dtype == FP8 else b)
                   for pa, pb in zip(bits["off"], bits["on"]) for a, b in zip(pa, pb))
        print(f"producer {key:18s} M={m:4d} off {statistics.median(t['off']):6.2f} on {statistics.median(t['on']):6.2f} us"
              f"  same bits {same}", flush=True)
        del xs
torch.manual_seed(0)
peers = {"bf16": _mlp(None, 4096, 14336, 2), **{n: _mlp(k, 4096, 14336, 2) for n, k in MLP_KEYS.items() if "token" in n}}
for m in (224, 256):
    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    t = {(s, n): [] for s in ("off", "on") for n in peers}
    outs = {}
    for turn in range(3):
        for s in (("off", "on") if turn != 1 else ("on", "off")):
            use(ON if s == "on" else OFF)
            for n, fns in peers.items():
                if turn == 0:
                    outs[(s, n)] = fns[0](x).clone()
                t[(s, n)].append(graph_us([lambda f=f: f(x) for f in fns]))
    bf = statistics.median(t[("off", "bf16")] + t[("on", "bf16")])
    line = f"mlp M={m:4d} bf16 {bf:7.2f}"
    for n in peers:
        if n == "bf16":
            continue
        off, on = statistics.median(t[("off", n)]), statistics.median(t[("on", n)])
        line += f" | {n} off {off:7.2f} on {on:7.2f} x{bf / off:.3f}->{bf / on:.3f} same {torch.equal(outs[('off', n)], outs[('on', n)])}"
    print(line, flush=True)
    print("raw", {f"{k[0]} {k[1]}": [round(v, 2) for v in vs] for k, vs in t.items()})
use(ON)
