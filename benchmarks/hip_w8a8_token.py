"""int8 per-token producers through the ``hip_w8a8`` backend, against the compiled chain and the copy
ceiling in one run: ``python -m benchmarks.hip_w8a8_token --out DIR`` from the checkout root (a GPU; the calls name
the backend, whichever FUSED_QUANT_BACKEND selects); writes ``DIR/act_quant_hip_w8a8_int8_token.json``."""

import argparse
import json

import torch
import torch._inductor.config

from benchmarks.bench import _eager_chain
from benchmarks.timing import bench_us as _bench, copy_ceiling, out_folder, require_gpu, versions as _versions
from fused_quant import keys as K
from fused_quant.registry import fused_act_quant

H = 14336
BACKEND = "hip_w8a8"  # what the calls name, whichever backend the process selected


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hip_w8a8_token", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for act_quant_hip_w8a8_int8_token.json")
    args = ap.parse_args()
    require_gpu(ap, "hip_w8a8_token")
    out = out_folder(ap, args.out, "hip_w8a8_token") / "act_quant_hip_w8a8_int8_token.json"
    torch._inductor.config.compile_threads = 1
    ceiling = copy_ceiling(False)
    print(f"backend {BACKEND}; copy ceiling {ceiling:.0f} GB/s; {_versions()}")
    key = K.kInt8DynamicTokenSym
    rows = []
    for act in ("silu_and_mul", "relu2"):
        compiled = torch.compile(_eager_chain(act, key), dynamic=False)
        for m in (8192, 32768):
            x = torch.randn(m, 2 * H if act == "silu_and_mul" else H, device="cuda").to(torch.bfloat16)
            nbytes = x.numel() * 2 + m * H + 4 * m
            ours = _bench(lambda: fused_act_quant(act, x, key, None, backend=BACKEND), False)
            comp = _bench(lambda: compiled(x, None), False)
            pct = 100 * nbytes / ours / 1e3 / ceiling
            rows.append(dict(act=act, M=m, ours_us=ours, compiled_us=comp, pct_ceiling=pct, vs_compiled=comp / ours))
            print(f"hip_w8a8 {act:13s} -> int8 per-token M={m:6d} ours {ours:7.1f} us compiled {comp:7.1f} us "
                  f"{pct:5.1f}% of ceiling x{comp / ours:.2f} vs compiled", flush=True)
    with open(out, "w") as f:
        json.dump({"backend": BACKEND, "ceiling_GBps": ceiling, "versions": _versions(),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
