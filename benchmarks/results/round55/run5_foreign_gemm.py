"""Round 55, run 5: run 4's question for bench gemm. Its graphs run one layer's GEMM back to back over weight copies,
so with PDL each of our calls may start (and ask L2 for its first weight lines) while the one before ends. Here
each call is preceded by a one-element add (a plain ATen kernel), the adds' own replay time subtracted; bf16
F.linear the same way. Printed: us per call chained (as bench gemm) / after a foreign kernel, for ours (the chain's
pick through QuantLinear) and bf16."""
import torch
import torch.nn.functional as F

from benchmarks import decode, timing
from fused_quant import QuantLinear
from fused_quant import keys as K
from fused_quant.contract import QuantizedActivation
from fused_quant.registry import platform_fp8_dtype

torch.manual_seed(0)
fp8 = platform_fp8_dtype()
sep = torch.zeros(1, device="cuda")


def foreign():
    sep.add_(1)


def both(fns):
    calls = max(len(fns), 8)
    pairs = []
    for f in fns:
        pairs += [foreign, f]
    return timing.graph_us(fns, calls=calls), timing.graph_us(pairs, calls=2 * calls) * 2 - timing.graph_us(
        [foreign], calls=calls)


for label, (n, k) in decode.LLAMA_3_8B.shapes.items():
    bf16 = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(decode.copies_for(2 * n * k))]
    for kind in ("fp8", "int8"):
        key = K.kFp8DynamicTokenSym if kind == "fp8" else K.kInt8DynamicTokenSym
        weights = decode._weights(kind, n, k, decode.copies_for(n * k), fp8)
        layers = [QuantLinear(w, ws, key, out_dtype=torch.bfloat16, name=label) for w, ws in weights]
        for m in (1, 4, 16, 64):
            if kind == "int8":
                xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            else:
                xq = (torch.randn(m, k, device="cuda") * 4).to(fp8)
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            qa = QuantizedActivation(xq, xs, torch.bfloat16, xq.shape, key)
            xb = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ours = both([lambda lay=lay: lay(qa) for lay in layers])
            b = both([lambda wb=wb: F.linear(xb, wb) for wb in bf16])
            print(f"{label:8s} {kind:4s} M={m:3d} ours {ours[0]:6.2f}/{ours[1]:6.2f} us ({n * k / ours[0] / 1e6:.2f}/"
                  f"{n * k / ours[1] / 1e6:.2f} TB/s)  bf16 {b[0]:6.2f}/{b[1]:6.2f}  x bf16 {b[0] / ours[0]:.3f}/"
                  f"{b[1] / ours[1]:.3f}", flush=True)
