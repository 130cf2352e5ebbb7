"""Fortieth round, run 3: the descriptor int8 GEMM storing its output tiles through pointers (as installed until
now), through a descriptor of whole tiles, and through a descriptor of two column halves (``INT8_STORES``), in the
installed rows' tiles. Part 1: the kernel alone on Llama-3-8B's four linears at 512-16384 tokens, CUDA-graph replays,
three turns with the order rotated, medians; every output compared bit for bit with the pointer store's. Part 2: the
int8 per-token MLP at 1024 and 4096 tokens timed as ``bench mlp`` times it (an eager loop, then graph replays), bf16's
MLP in the same turns, three turns rotated, medians; output bits compared between the arms."""

import json
import sys

import torch

import fused_quant
from benchmarks import decode
from benchmarks.decode import SHAPES
from benchmarks.timing import graph_us, loop_us, versions
from fused_quant import keys as K
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g

STORES = g.INT8_STORES


def use(store):
    g.INT8_TMA_STORE = store
    fused_quant.reset()


def kernels(ms):
    rows = []
    for label, (n, k) in SHAPES.items():
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda")
        ws = torch.rand(n, 1, device="cuda") * 0.01 + 1e-3
        for m in ms:
            xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            p = GemmProblem(m, n, k, "int8", torch.int8, torch.bfloat16, xq.device, True, True, False)
            calls, ref, errors, took = {}, None, {}, {}
            for store in STORES:
                use(store)
                try:
                    call = g.bind_triton_int8(p, w, ws, None)
                    out = call(xq, xs)
                except Exception as exc:  # e.g. a tile whose store buffer does not fit shared memory
                    errors[store] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                    continue
                torch.cuda.synchronize()
                if ref is None:
                    ref = out
                elif not torch.equal(out.view(torch.int16), ref.view(torch.int16)):
                    raise SystemExit(f"{label} M={m} {store}: other bits than the pointer store")
                calls[store] = call
                took[store] = g._triton_int8_call(p, tma=True).plan.kwargs["STORE"]  # 0 where the buffer does not fit
            names = list(calls)
            times = {s: [] for s in names}
            for turn in range(len(names)):
                for s in names[turn:] + names[:turn]:
                    times[s].append(graph_us([lambda c=calls[s]: c(xq, xs)]))
            med = {s: sorted(v)[len(v) // 2] for s, v in times.items()}
            row = {"shape": label, "M": m, "row": g.int8_gemm_row(p), "us": med, "turns": times, "errors": errors,
                   "STORE": took}
            rows.append(row)
            print(f"{label:7s} M={m:6d} {row['row']} " + "  ".join(f"{s} ({took[s]}) {v:8.1f}" for s, v in med.items())
                  + (f"  errors {errors}" if errors else ""), flush=True)
        del w, ws
        torch.cuda.empty_cache()
    sums = {}
    for m in ms:
        at = [r for r in rows if r["M"] == m]
        sums[m] = {s: sum(r["us"][s] for r in at) for s in STORES if all(s in r["us"] for r in at)}
        base = sums[m].get("pointers")
        print(f"M={m:6d} sum over shapes: " + "  ".join(
            f"{s} {v:8.1f}" + (f" ({base / v:.3f}x)" if base else "") for s, v in sums[m].items()), flush=True)
    return rows, sums


def mlp(ms, arms):
    d, h = decode.LLAMA_3_8B.d, decode.LLAMA_3_8B.h
    torch.manual_seed(0)
    bf16 = decode._mlp(None, d, h, 2)
    int8 = decode._mlp(K.kInt8DynamicTokenSym, d, h, 2)
    rows = []
    for m in ms:
        x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
        calls = 4 if m >= 4096 else 8
        names = ["bf16", *arms]
        graph, bits = {a: [] for a in names}, {}
        for turn in range(len(names)):
            for arm in names[turn:] + names[:turn]:
                fns = bf16 if arm == "bf16" else int8
                if arm != "bf16":
                    use(arm)
                    bits[arm] = int8[0](x).view(torch.int16)
                loop_us({arm: lambda: fns[0](x)})
                graph[arm].append(graph_us([lambda f=f: f(x) for f in fns], calls=calls))
        same = all(torch.equal(b, next(iter(bits.values()))) for b in bits.values())
        med = {a: sorted(v)[len(v) // 2] for a, v in graph.items()}
        row = {"M": m, "graph_us": graph, "median_us": med, "same_bits": same,
               "x_bf16": {a: med["bf16"] / med[a] for a in arms}}
        rows.append(row)
        print(f"MLP M={m:6d} " + "  ".join(f"{a} {v:8.1f}" for a, v in med.items()) + "  x bf16 "
              + " / ".join(f"{a} {v:.3f}" for a, v in row["x_bf16"].items()) + f"  same bits {same}", flush=True)
        if not same:
            raise SystemExit(f"MLP M={m}: the arms gave other bits")
    return rows


def main():
    out = {"versions": versions()}
    print(out["versions"], flush=True)
    out["kernels"], out["sums"] = kernels([int(v) for v in sys.argv[1].split(",")])
    arms = [s for s in STORES if all(s in r["us"] for r in out["kernels"])]
    out["mlp"] = mlp([int(v) for v in sys.argv[2].split(",")], arms)
    json.dump(out, open(sys.argv[3], "w"), indent=1)


if __name__ == "__main__":
    main()
