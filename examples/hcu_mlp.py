"""The Hygon DCU fork's MLP pattern, end to end, on whatever backend this node has.

    gate_up = gate_up_proj(x)
    xq, xs = act_fn(gate_up)                                   # fused silu_mul_quant
    out = down_proj(gate_up, x_and_scale_quanted=(xq, xs))     # gate_up: an ignored placeholder

Compares with the unfused path (silu_and_mul, then the layer quantizes) and prints the backend,
the fused-vs-unfused difference (0 with the default profile) and the error against float64.
Run: ``python examples/hcu_mlp.py [--tokens 32] [--numerics default|hcu]``.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import fused_quant as fq


class HcuMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int, numerics: str | None = None):
        super().__init__()
        key = fq.kInt8DynamicTokenSym
        self.gate_up_proj = fq.QuantLinear.from_float(nn.Linear(hidden, 2 * intermediate, bias=False), key)
        self.down_proj = fq.QuantLinear.from_float(nn.Linear(intermediate, hidden, bias=False), key)
        self.act_fn = fq.FusedSiluAndMulAndQuant(numerics)
        fq.name_quant_linears(self, "mlp")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up_proj(x)
        xq, xs = self.act_fn(gate_up)
        return self.down_proj(gate_up, x_and_scale_quanted=(xq, xs))

    def unfused(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(fq.SiluAndMul()(self.gate_up_proj(x)))


def _count(minimum: int):
    """An argparse type: an integer >= ``minimum``, else a usage error saying so."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value
    return parse


def _max(t: torch.Tensor) -> float:
    return float(t.max()) if t.numel() else 0.0  # no tokens: nothing differs


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=_count(0), default=32, help="rows of x (0 is valid: an empty batch)")
    parser.add_argument("--hidden", type=_count(1), default=256, help="the MLP's hidden size")
    parser.add_argument("--intermediate", type=_count(1), default=512, help="the MLP's intermediate size")
    parser.add_argument("--numerics", default=None, choices=("default", "hcu"), type=lambda text: text.strip().lower(),
                        help="numerics profile (default: FUSED_QUANT_NUMERICS; case and spaces fold, as there)")
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    mlp = HcuMLP(args.hidden, args.intermediate, args.numerics).to(device=device, dtype=torch.bfloat16)
    x = torch.randn(args.tokens, args.hidden, device=device, dtype=torch.bfloat16)
    out, ref = mlp(x), mlp.unfused(x)
    gate_up = mlp.gate_up_proj(x)
    xq, xs = mlp.act_fn(gate_up)
    f64 = ((xq.double() @ mlp.down_proj.weight.double().T) * xs.double() * mlp.down_proj.weight_scale.double().T)
    result = {
        "fused_vs_unfused_max_abs": _max((out.float() - ref.float()).abs()),
        "gemm_vs_float64_max_rel": _max((out.double() - f64).abs() / f64.abs().clamp_min(1e-6)),
    }
    print(f"backend {fq.current_backend().name} ({fq.current_backend().reason}); device {device}")
    print(f"out {tuple(out.shape)} {out.dtype}; fused vs unfused max |diff| = {result['fused_vs_unfused_max_abs']}; "
          f"GEMM vs float64 max rel err = {result['gemm_vs_float64_max_rel']:.2e}")
    return result


if __name__ == "__main__":
    main()
