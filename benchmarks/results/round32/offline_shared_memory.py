"""Round 32, offline (a CPU machine, Triton 3.7.1): the shared memory of the small-M kernel as each sm_90 row of the
config table runs it, compiled for sm_90 by triton.compile (no GPU needed): the plain kernel (quantized input) and
the quantizing one for fp32 and bf16 rows, per-token and per-tensor, one line per distinct variant. Run from the
repository root; output as in offline_shared_memory.txt."""
import sys, json, torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fused_quant.gemm import GemmProblem
from fused_quant.kernels import gemm_launch as g
from fused_quant.kernels.triton import small_m_gemm as kern

TT = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.int8: "i8",
      torch.float8_e4m3fn: "fp8e4nv", torch.int32: "i32"}

def shared(plan, dtypes, scalars):
    fn = plan.kernel
    names = fn.arg_names
    kw = dict(plan.kwargs)
    opts = {k: kw.pop(k) for k in ("num_warps", "num_stages", "launch_pdl") if k in kw}
    opts.pop("launch_pdl", None)
    sig, consts, attrs = {}, {}, {}
    vals = list(dtypes) + list(scalars)
    for i, n in enumerate(names):
        if n in kw:
            sig[n] = "constexpr"; consts[(i,)] = kw[n]
        else:
            v = vals[i]
            if isinstance(v, torch.dtype):
                sig[n] = "*" + TT[v]; attrs[(i,)] = [["tt.divisibility", 16]]
            else:
                sig[n] = "i32"
                if v % 16 == 0: attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
    return k.metadata.shared

def main():
    rows = json.load(open("fused_quant/kernels/small_m_gemm_configs.json"))["rows"]
    seen = {}
    for r in rows:
        if r["arch"] != "sm_90": continue
        cfg = {f: r[f] for f in g.CONFIG_FIELDS}
        for per_token in (True, False):
            for xd in (torch.float32, torch.bfloat16, None):
                m = 1 if cfg["BLOCK_M"] == 1 else min(16, cfg["BLOCK_M"])
                if xd is not None and not g.quantizes_float_tiles(cfg, r["kind"]): continue
                key = (r["kind"], tuple(cfg.items()), per_token, xd, r["k"] % cfg["BLOCK_K"] == 0)
                if key in seen: continue
                wd = torch.int8 if r["kind"] == "int8" else torch.float8_e4m3fn
                p = GemmProblem(m, r["n"], r["k"], r["kind"], wd, torch.bfloat16, torch.device("cpu"), per_token, True, False)
                xq = None if xd is None else (f"{r['kind']}_dynamic_token" if per_token else f"{r['kind']}_static_tensor", xd)
                c = g.SmallMCall(p, cfg, xq)
                call = c.main if c.fused is None else c.fused
                acc = torch.int32 if r["kind"] == "int8" else torch.float32
                dt = (xd or wd, wd, torch.float32, torch.float32, torch.float32, torch.bfloat16,
                      torch.bfloat16 if c.fused is None else acc, torch.float32 if c.fused is None else torch.int32, torch.float32)
                try:
                    s = shared(call.plan, dt, g.gemm_scalars(p, torch.empty(r["n"], r["k"], dtype=torch.int8)))
                except Exception as e:
                    s = f"ERR {type(e).__name__}: {str(e)[:80]}"
                seen[key] = s
                print(r["kind"], r["shape"], r["m"], cfg, "per_token" if per_token else "per_tensor", xd, s, flush=True)

main()
