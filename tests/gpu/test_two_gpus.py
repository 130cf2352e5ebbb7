"""GPU rows with two devices in one process (a model spread over GPUs, as transformers' ``device_map="auto"``
places it): layers on the second GPU called while the first is the current device. Triton launches on the
current device and its stream, so each launch of the package makes its operands' device current; the results
equal those of the same layer on the first GPU, bit for bit (the same kernels on the same kind of card)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fused_quant import QuantLinear, SiluAndMul, linear_act_quant
from fused_quant import keys as K
from tests.helpers import assert_bits_equal

pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus]

BACKENDS = [pytest.param("triton_fp8", marks=pytest.mark.triton_fp8),
            pytest.param("hip_w8a8", marks=pytest.mark.hip_w8a8)]
D, H = 512, 1024


def _mlp(key: K.QuantKey, device: torch.device):
    """gate_up and down of one seed's float weights, quantized on ``device``."""
    torch.manual_seed(0)
    scale = 0.05 if K.is_static(key) else None
    gate_up = nn.Linear(D, 2 * H, bias=True, dtype=torch.bfloat16)
    down = nn.Linear(H, D, bias=False, dtype=torch.bfloat16)
    return (QuantLinear.from_float(gate_up.to(device), key, scale, name="gate_up"),
            QuantLinear.from_float(down.to(device), key, scale, name="down"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key_name", list(K.KEYS))
def test_layers_on_the_second_gpu_while_the_first_is_current(backend, key_name, backend_env):
    """Every key's MLP (``linear_act_quant``: the producer, the one-launch GEMM where it binds, the small-M and
    larger-M GEMMs) at 1, 16 and 300 tokens, on cuda:1 with cuda:0 current: three calls each (the first checked,
    the later bound and launched directly where the device allows), against the same MLP on cuda:0; fresh
    random input with a zero row and large values."""
    backend_env(backend)
    key = K.KEYS[key_name]
    first, second = torch.device("cuda", 0), torch.device("cuda", 1)
    act = SiluAndMul()
    with torch.cuda.device(first):
        mlps = {dev: _mlp(key, dev) for dev in (first, second)}
        for m in (1, 16, 300):
            x = torch.randn(m, D, generator=torch.Generator().manual_seed(m), dtype=torch.bfloat16) * 3
            x[m // 2] = 0
            x[0, :8] = 300.0
            outs = {}
            for dev, (gate_up, down) in mlps.items():
                xd = x.to(dev)
                for _ in range(3):
                    out = down(linear_act_quant(gate_up, xd, act, down))
                torch.cuda.synchronize(dev)
                assert out.device == dev
                outs[dev] = out.cpu()
            assert torch.cuda.current_device() == 0
            assert_bits_equal(outs[second], outs[first], f"{backend} {key_name} M={m}: cuda:1 vs cuda:0")
