"""Round 18: why the int8 per-token MLP took 141.8 us at M = 224 and 106.2 at 256 (ab18c): each kernel's GPU time
in eager bound calls of the Llama-3-8B MLP at M = 192..256 (profiler), both per-token keys."""
import collections, torch
from torch.profiler import profile, ProfilerActivity
from benchmarks.decode import _mlp, MLP_KEYS
from fused_quant.gemm import GemmProblem
from fused_quant.gemm import select_gemm_provider

torch.manual_seed(0)
for name in ("int8_token", "fp8_token"):
    fns = _mlp(MLP_KEYS[name], 4096, 14336, 1)
    f = fns[0]
    for m in (192, 224, 240, 256):
        x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            f(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                f(x)
            torch.cuda.synchronize()
        t = collections.defaultdict(list)
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                t[e.name[:48]].append(getattr(e, "device_time", None) or e.cuda_time)
        kind = "int8" if "int8" in name else "fp8"
        prov = [select_gemm_provider(GemmProblem(m, n, k, kind, torch.int8 if kind == "int8" else torch.float8_e4m3fn,
                                                 torch.bfloat16, x.device, True, True, False))[0].name
                for n, k in ((28672, 4096), (4096, 14336))]
        print(f"{name} M={m} providers {prov}: " + " | ".join(f"{k} x{len(v) // 5} {sorted(v)[len(v) // 2]:.1f}" for k, v in t.items()),
              flush=True)
