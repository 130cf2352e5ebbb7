"""int8 per-token producers through the ``hip_w8a8`` backend, against the compiled chain and the copy
ceiling in one run: ``FUSED_QUANT_BACKEND=hip_w8a8 python -m benchmarks.hip_w8a8_token`` from the
checkout root; writes ``act_quant_hip_w8a8_int8_token.json`` to ``$OUT`` (or the current directory)."""

import json
import os

import torch
import torch._inductor.config

from benchmarks.bench import _eager_chain
from benchmarks.timing import bench_us as _bench, copy_ceiling, versions as _versions
from fused_quant import keys as K
from fused_quant.registry import current_backend_name, fused_act_quant

H = 14336


def main() -> None:
    torch._inductor.config.compile_threads = 1
    ceiling = copy_ceiling(False)
    print(f"backend {current_backend_name()}; copy ceiling {ceiling:.0f} GB/s; {_versions()}")
    key = K.kInt8DynamicTokenSym
    rows = []
    for act in ("silu_and_mul", "relu2"):
        compiled = torch.compile(_eager_chain(act, key), dynamic=False)
        for m in (8192, 32768):
            x = torch.randn(m, 2 * H if act == "silu_and_mul" else H, device="cuda").to(torch.bfloat16)
            nbytes = x.numel() * 2 + m * H + 4 * m
            ours = _bench(lambda: fused_act_quant(act, x, key, None, backend="hip_w8a8"), False)
            comp = _bench(lambda: compiled(x, None), False)
            pct = 100 * nbytes / ours / 1e3 / ceiling
            rows.append(dict(act=act, M=m, ours_us=ours, compiled_us=comp, pct_ceiling=pct, vs_compiled=comp / ours))
            print(f"hip_w8a8 {act:13s} -> int8 per-token M={m:6d} ours {ours:7.1f} us compiled {comp:7.1f} us "
                  f"{pct:5.1f}% of ceiling x{comp / ours:.2f} vs compiled", flush=True)
    out = os.path.join(os.environ.get("OUT", "."), "act_quant_hip_w8a8_int8_token.json")
    with open(out, "w") as f:
        json.dump({"backend": current_backend_name(), "ceiling_GBps": ceiling, "versions": _versions(),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
