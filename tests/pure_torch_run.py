"""``python -m tests.pure_torch_run DEVICE [BACKEND]``: the ``torch`` backend in a process where triton
cannot be imported (``sys.modules["triton"] = None`` before fused_quant), on DEVICE.

Runs every producer (activation x key x numerics profile, adversarial rows included), ``quantize``,
``QuantLinear`` (int8 and FP8 keys; plain, pre-quantized and HCU-tuple inputs) and the HCU
``FusedSiluAndMulAndQuant``, each compared bitwise with ``reference.py`` on the same device (GEMMs
against float64); checks that auto selection picked ``torch`` and said why, and that triton was
never imported. Prints one line per group and exits non-zero on the first mismatch.
"""

from __future__ import annotations

import sys

sys.modules["triton"] = None  # type: ignore[assignment]  # any `import triton` now raises ImportError

import torch  # noqa: E402
from torch import nn  # noqa: E402

import fused_quant as fq  # noqa: E402
from fused_quant import keys as K  # noqa: E402
from fused_quant.reference import act_quant_ref, quant_ref  # noqa: E402
from tests.helpers import adversarial_rows, assert_bits_equal, assert_gemm_close  # noqa: E402


def _rows(act: str, device: torch.device, dtype=torch.bfloat16) -> torch.Tensor:
    width = 2 * 96 if act == "silu_and_mul" else 96
    x = (torch.randn(24, width, generator=torch.Generator().manual_seed(0)) * 4).to(dtype)
    x[:8] = adversarial_rows(width, dtype, seed=1)[:8]
    return x.to(device)


def main(device_name: str, expected_backend: str = "torch") -> None:
    device = torch.device(device_name)
    selected = fq.current_backend()
    if selected.name != expected_backend:
        raise SystemExit(f"selected {selected.name} ({selected.reason}), expected {expected_backend}")
    print(f"backend {selected.name}: {selected.reason}")
    scale = torch.tensor([0.0625], device=device)
    checks = 0
    for act in ("silu_and_mul", "relu2", "identity"):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            x = _rows(act, device, dtype)
            for name, key in K.KEYS.items():
                s = scale if K.is_static(key) else None
                for numerics in ("default", "hcu"):
                    qa = fq.fused_act_quant(act, x, key, s, numerics=numerics)
                    q, rs = act_quant_ref(act, x, key, s, numerics=numerics, fp8_dtype=qa.data.dtype
                                          if K.is_fp8(key) else torch.float8_e4m3fn)
                    assert_bits_equal(qa.data, q, f"{act} {dtype} -> {name} ({numerics})")
                    assert_bits_equal(qa.scale, rs, f"{act} {dtype} -> {name} scale ({numerics})")
                    if qa.data.device != x.device:
                        raise SystemExit(f"{act} -> {name}: q on {qa.data.device}, input on {x.device}")
                    checks += 1
    print(f"producers: {checks} bitwise checks on {device}")
    x = torch.randn(7, 64, device=device, dtype=torch.bfloat16)
    for key in K.KEYS.values():
        s = scale if K.is_static(key) else None
        qa = fq.quantize(x, key, s)
        q, rs = quant_ref(x, key, s, fp8_dtype=qa.data.dtype if K.is_fp8(key) else torch.float8_e4m3fn)
        assert_bits_equal(qa.data, q, f"quantize {K.key_name(key)}")
    print("quantize: every key")
    for key in K.KEYS.values():
        torch.manual_seed(0)
        lin = nn.Linear(64, 48, bias=True).to(torch.bfloat16)
        layer = fq.QuantLinear.from_float(lin, key, scale if K.is_static(key) else None).to(device)
        h = torch.randn(5, 2 * 64, device=device, dtype=torch.bfloat16)
        qa = fq.maybe_fused_act_quant(fq.SiluAndMul(), h, layer)
        if not isinstance(qa, fq.QuantizedActivation):
            raise SystemExit(f"{K.key_name(key)}: no fused producer ran on {device}")
        out = layer(qa)
        assert_gemm_close(out, qa.data, qa.scale, layer.weight, layer.weight_scale, layer.bias,
                          exact_acc=not K.is_fp8(key), what=f"QuantLinear {K.key_name(key)}")
        assert_bits_equal(layer(fq.SiluAndMul()(h)), out, "fused == unfused")
        assert_bits_equal(layer(h, x_and_scale_quanted=(qa.data, qa.scale)), out, "HCU tuple")
    print("QuantLinear: every key, fused == unfused, HCU tuple")
    xq, xs = fq.FusedSiluAndMulAndQuant()(torch.randn(3, 2 * 64, device=device, dtype=torch.bfloat16))
    if xq.dtype != torch.int8 or xs.shape != (3, 1) or xq.device.type != device.type:
        raise SystemExit(f"FusedSiluAndMulAndQuant: {xq.dtype} {tuple(xs.shape)} on {xq.device}")
    print("FusedSiluAndMulAndQuant: int8 per token")
    if sys.modules.get("triton") is not None:
        raise SystemExit("triton was imported")
    print("triton never imported")


if __name__ == "__main__":
    main(*sys.argv[1:])
