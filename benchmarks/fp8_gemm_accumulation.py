"""How far the H200's FP8 GEMM (``torch._scaled_mm``, fp32 out, unit scales) is from float64, relative
to sum |x||w| (the magnitude the GEMM tests' error bound scales with): the worst ratio over 20
random [64, K] x [K, 256] products per K, next to the bound of ``tests.helpers.assert_gemm_close``.

``python -m benchmarks.fp8_gemm_accumulation`` from the checkout root (GPU with FP8).
"""

import argparse

import torch

from benchmarks.timing import require_gpu


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fp8_gemm_accumulation", description=__doc__.split("\n\n")[0])
    ap.parse_args()
    require_gpu(ap, "fp8_gemm_accumulation")
    torch.manual_seed(0)
    one = torch.ones((), device="cuda")
    for k in (512, 1024, 4096, 14336):
        worst = 0.0
        for _ in range(20):
            x = (torch.randn(64, k, device="cuda") * 60).clamp(-448, 448).to(torch.float8_e4m3fn)
            w = (torch.randn(256, k, device="cuda") * 60).clamp(-448, 448).to(torch.float8_e4m3fn)
            out = torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32).double()
            ref = x.double() @ w.double().T
            mag = x.double().abs() @ w.double().abs().T
            worst = max(worst, float(((out - ref).abs() / mag).max()))
        fp32_only = (k + 4) * 2.0**-24
        bound = fp32_only + 4 * 2.0**-13
        print(f"K={k:6d} worst err/mag {worst:.3e} = 2^{torch.tensor(worst).log2().item():.1f}; "
              f"fp32-accumulation bound {fp32_only:.3e}; tensor-core bound {bound:.3e}")


if __name__ == "__main__":
    main()
