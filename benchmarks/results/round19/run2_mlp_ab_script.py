"""Nineteenth round: the Llama-3-8B MLP under CUDA-graph replay at M between the swept buckets, with the kernel
of the working tree (tag names it: base = tokens past M read row 0, fix = rm % M); outputs saved for a bits check."""
import statistics, sys, torch
from benchmarks.decode import _mlp, MLP_KEYS
from benchmarks.timing import graph_us

tag, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
peers = {"bf16": _mlp(None, 4096, 14336, 2), **{n: _mlp(k, 4096, 14336, 2) for n, k in MLP_KEYS.items()}}
outs = {}
for m in (48, 100, 192, 224, 256):
    x = torch.randn(m, 4096, generator=torch.Generator().manual_seed(m), dtype=torch.float32).to("cuda", torch.bfloat16)
    t = {n: graph_us([lambda f=f: f(x) for f in fns]) for n, fns in peers.items()}
    outs[m] = {n: fns[0](x).cpu() for n, fns in peers.items()}
    print(f"{tag} M={m:4d} " + " ".join(f"{n} {v:7.2f}" for n, v in t.items())
          + " | x bf16 " + " ".join(f"{n} {t['bf16'] / v:.3f}" for n, v in t.items() if n != "bf16"), flush=True)
torch.save(outs, path)
