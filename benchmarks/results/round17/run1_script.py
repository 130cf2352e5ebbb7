"""Round 17 experiment: FP8 row-wise torch._scaled_mm vs tensor-wise fp32 out + one Triton epilogue kernel;
per-token silu producer configs at M = 128 / 256; int8 gate_up configs at M = 256."""
import sys, torch, triton, triton.language as tl
from benchmarks.decode import copies_for, _weights
from benchmarks.timing import graph_us
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels.triton import small_m_gemm as kern
from fused_quant.gemm import GemmProblem

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
FP8 = torch.float8_e4m3fn
one = torch.ones((), device="cuda")

def epi(acc, xs, ws, out, bn, bm, warps):
    m, n = acc.shape
    grid = (triton.cdiv(n, bn), triton.cdiv(m, bm))
    kern.split_k_epilogue_kernel[grid](acc, xs, ws, ws, out, m, n, 1, n, XS_PER_TOKEN=True, WS_PER_CHANNEL=True,
        HAS_BIAS=False, OUT=tl.bfloat16, INT8=False, BLOCK_N=bn, BLOCK_M=bm, PDL=False, num_warps=warps)
    return out

def f32_epi(xq, xs, w, ws, bn=64, bm=16, warps=4):
    acc = torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
    out = torch.empty(acc.shape, dtype=torch.bfloat16, device="cuda")
    return epi(acc, xs, ws, out, bn, bm, warps)

def err(out, xq, xs, w, ws):
    ref = (xq.double() @ w.double().T) * xs.double() * ws.double().T
    mag = (xq.double().abs() @ w.double().abs().T) * xs.double() * ws.double().T
    return float(((out.double() - ref).abs() / (mag + 1e-30)).max())

def part1():
    print("== FP8 GEMM: row-wise bf16 | tensor-wise bf16 | fp32 tensor-wise alone | fp32 + epilogue (bn,bm,warps) ; us, graph")
    for label, (n, k) in SHAPES.items():
        weights = _weights("fp8", n, k, copies_for(n * k), FP8)
        for m in (16, 64, 128, 256, 512, 1024, 2048, 4096):
            xq = (torch.randn(m, k, device="cuda") * 4).to(FP8)
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            xs1 = torch.full((1, 1), 0.005, device="cuda")
            each = lambda f: [lambda w=w, ws=ws: f(w, ws) for w, ws in weights]
            row = graph_us(each(lambda w, ws: g.scaled_mm_fp8(xq, xs, w, ws, None, torch.bfloat16)))
            ten = graph_us(each(lambda w, ws: g.scaled_mm_fp8(xq, xs1, w, ws[:1], None, torch.bfloat16)))
            f32 = graph_us(each(lambda w, ws: torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)))
            line = f"{label:7s} M={m:5d} row {row:8.2f} | ten {ten:8.2f} | f32 {f32:8.2f}"
            best = None
            for bn, bm, warps in ((64, 16, 4), (128, 16, 4), (64, 32, 4), (128, 32, 8), (256, 16, 4)):
                us = graph_us(each(lambda w, ws: f32_epi(xq, xs, w, ws, bn, bm, warps)))
                line += f" | {bn},{bm},{warps} {us:8.2f}"
                best = us if best is None else min(best, us)
            w, ws = weights[0]
            e_row = err(g.scaled_mm_fp8(xq, xs, w, ws, None, torch.bfloat16), xq, xs, w, ws)
            e_new = err(f32_epi(xq, xs, w, ws), xq, xs, w, ws)
            line += f" || best/row {best / row:.3f} err row {e_row:.1e} new {e_new:.1e}"
            print(line, flush=True)
        del weights
        torch.cuda.empty_cache()

def part2():
    from benchmarks.tune_act_quant_decode import run
    cfgs = [dict(variant="chunks", CHUNK=c, num_warps=w) for c in (2048, 1024) for w in (4, 8, 16)]
    cfgs += [dict(variant="persistent", BLOCK_N=bn, num_warps=w, programs_per_sm=p, scratch=1, STAGES=s)
             for bn, w, p, s in ((2048, 8, 8, 3), (2048, 8, 4, 3), (1024, 4, 8, 3), (4096, 16, 2, 2), (2048, 16, 4, 2))]
    cfgs += [dict(variant="rows", ROWS=1, BLOCK_N=16384, num_warps=w) for w in (16, 32)]
    print("== per-token silu producer, H = 14336")
    for m in (128, 256):
        for key in ("fp8_dynamic_token", "int8_dynamic_token"):
            try:
                run("silu_and_mul", key, m, 2 * 14336, cfgs)
            except Exception as exc:
                print("fail", key, m, type(exc).__name__, str(exc)[:200], flush=True)
        run("silu_and_mul", "fp8_static_tensor", m, 2 * 14336, [])

def part3():
    print("== int8 gate_up / down at M = 256 (small-M configs)")
    for label in ("gate_up", "down"):
        n, k = SHAPES[label]
        weights = _weights("int8", n, k, copies_for(n * k), FP8)
        for m in (128, 256):
            xq = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            xs = torch.rand(m, 1, device="cuda") * 0.01 + 1e-3
            p = GemmProblem(m, n, k, "int8", xq.dtype, torch.bfloat16, xq.device, True, True, False)
            line = f"int8 {label} M={m}"
            for bn, bm, bk, sp, warps, st in ((128, 256, 128, 1, 8, 4), (128, 128, 128, 1, 8, 3), (256, 128, 128, 1, 8, 3),
                                              (128, 256, 128, 2, 8, 4), (64, 256, 128, 1, 8, 4), (128, 256, 64, 1, 8, 6),
                                              (256, 256, 64, 1, 8, 3), (128, 128, 128, 2, 8, 3), (64, 128, 128, 2, 4, 4)):
                cfg = dict(BLOCK_N=bn, BLOCK_M=bm, BLOCK_K=bk, splits=sp, num_warps=warps, num_stages=st)
                try:
                    calls = [g.bind_small_m(p, w_, ws_, None, cfg) for w_, ws_ in weights]
                    calls[0](xq, xs)
                    us = graph_us([lambda c=c: c(xq, xs) for c in calls])
                    line += f" | {bn},{bm},{bk},{sp},{warps},{st} {us:.2f}"
                except Exception as exc:
                    line += f" | {bn},{bm},{bk},{sp} skip {type(exc).__name__}"
            tri = graph_us([lambda w=w, ws=ws: g.triton_int8(xq, xs, w, ws, None, torch.bfloat16) for w, ws in weights])
            print(line + f" | triton_int8 {tri:.2f}", flush=True)
        del weights
        torch.cuda.empty_cache()

if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for part in sys.argv[1:] or ["1", "2", "3"]:
        globals()["part" + part]()
