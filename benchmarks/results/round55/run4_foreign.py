"""Round 55, run 4: how much the MLP graph replays owe to PDL between back-to-back MLP calls. bench mlp captures
MLP calls back to back, so each call's first kernel (ours: launched with PDL) may start while the previous call's
last kernel (ours too) ends. In a decoder an RMSNorm (a kernel without PDL) comes first. Here each call is preceded
by a one-element add (a plain ATen kernel), the adds' own replay time (a graph of adds alone) subtracted; bf16 the
same way. Printed: chained (as bench mlp) and after-a-foreign-kernel microseconds per call, and the ratios."""
import torch

from benchmarks import decode, timing

torch.manual_seed(0)
d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
peers = {"bf16": decode._mlp(None, d, h, 2)} | {n: decode._mlp(k, d, h, 2) for n, k in decode.MLP_KEYS.items()}
sep = torch.zeros(1, device="cuda")


def foreign():
    sep.add_(1)


for m in (1, 16, 64, 256):
    x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
    calls = decode.mlp_graph_calls(m)
    for turn in range(2):
        alone = timing.graph_us([foreign], calls=calls)
        chained, after = {}, {}
        for name, fns in (peers.items() if turn == 0 else reversed(list(peers.items()))):
            chained[name] = timing.graph_us([lambda f=f: f(x) for f in fns], calls=calls)
            pairs = []
            for f in fns:
                pairs += [foreign, lambda f=f: f(x)]
            after[name] = timing.graph_us(pairs, calls=2 * calls) * 2 - alone
        print(f"M={m:4d} turn {turn} add alone {alone:5.2f} us | "
              + "  ".join(f"{n} {chained[n]:6.1f}/{after[n]:6.1f}" for n in peers)
              + " | x bf16 chained " + "/".join(f"{chained['bf16'] / chained[n]:.3f}" for n in peers if n != "bf16")
              + " after " + "/".join(f"{after['bf16'] / after[n]:.3f}" for n in peers if n != "bf16"), flush=True)
