"""Round 18: the kernels a torch.compile'd Llama-3-8B MLP launches per call (mode "default", no CUDA graphs: the
kernels that reduce-overhead would record), FP8 per-token at M = 64 / 256 where torch._scaled_mm runs its fp32 way
through the custom op's unbound call (a unit scale made per call): kernel names and counts from the profiler."""
import collections, torch
from torch.profiler import profile, ProfilerActivity
from benchmarks.decode import _mlp
from fused_quant import keys as K
from fused_quant.kernels import gemm_launch as g

torch.manual_seed(0)
fn = _mlp(K.kFp8DynamicTokenSym, 4096, 14336, 1)[0]
cf = torch.compile(fn, fullgraph=True)
for m in (64, 256):
    x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        cf(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            cf(x)
        torch.cuda.synchronize()
    names = collections.Counter(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"M={m}: kernels per call (4 calls):", {k[:70]: v / 4 for k, v in names.items()})
    fills = {k: v / 4 for k, v in names.items() if "fill" in k.lower() or "Fill" in k}
    us = {}
    for e in prof.events():
        if e.name in fills:
            us.setdefault(e.name[:60], []).append(round(getattr(e, "device_time", None) or e.cuda_time, 2))
    print(f"M={m}: fill kernels per call {sum(fills.values())}, their GPU us each {us}", flush=True)
