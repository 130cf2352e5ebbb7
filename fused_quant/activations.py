"""The activation vocabulary: one table of (name, module type, kernel code, input width factor).

``SiluAndMul`` and ``ReLUSquared`` are the module types the producer registry keys on
(``nn.Identity`` stands for "quantize as is"). Every other activation table of the
package (validation's names, the kernels' codes, output shapes) is derived from ``ACTIVATIONS``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _nn_module

from fused_quant.errors import ShapeMismatchError


class SiluAndMul(nn.Module):
    """``silu(x[..., :d]) * x[..., d:]`` in eager torch (the unfused chain of docs/NUMERICS.md)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[*, 2d]`` holding [gate | up]; ``[*, d]`` in x's dtype (ShapeMismatchError for an odd width)."""
        if x.dim() == 0 or x.shape[-1] % 2:  # an odd width would broadcast one column of gate over the up half
            raise ShapeMismatchError(f"silu_and_mul input's last dim holds [gate | up] and must be even; got "
                                     f"{'a 0-d tensor' if x.dim() == 0 else f'shape {tuple(x.shape)}'}",
                                     x_shape=x.shape)
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]


class ReLUSquared(nn.Module):
    """``relu(x)^2`` in eager torch: one rounding of the fp32 square."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``relu(x)^2``, x's shape and dtype."""
        return torch.square(F.relu(x))


class Activation(NamedTuple):
    name: str  # stable name: custom ops, JSON, the functional form
    module_type: type  # the nn.Module type maybe_fused_act_quant recognizes
    code: int  # the Triton kernels' ACT constexpr
    width_factor: int  # input features per output feature (silu_and_mul reads [gate | up])


ACTIVATIONS: dict[str, Activation] = {a.name: a for a in (
    Activation("silu_and_mul", SiluAndMul, 2, 2),
    Activation("relu2", ReLUSquared, 1, 1),
    Activation("identity", nn.Identity, 0, 1),
)}
NAMES = tuple(ACTIVATIONS)


def out_features(act: str, in_features: int) -> int:
    """The width of ``act``'s output for an input of ``in_features``."""
    return in_features // ACTIVATIONS[act].width_factor


# Other libraries' activation modules that compute one of ours with the same torch ops (so the same
# bits), by qualified class name: nothing is imported to recognize them. Hugging Face's SiLU is not here:
# it is silu(gate) alone, the product with up happens outside it (only a gated MLP module fuses it).
ALIASES = {
    "transformers.activations.ReLUSquaredActivation": "relu2",  # square(relu(x)), as ReLUSquared
}


def hooked(module: object) -> bool:
    """Whether calling ``module`` runs more than its class's forward: forward hooks (its own or global ones) or a
    ``forward`` set on the instance (a wrapper, accelerate's hooks), which a kernel standing in for the call would
    skip. False for what is not a module (a plain callable runs as it is)."""
    if not isinstance(module, nn.Module):
        return False
    return bool(module._forward_hooks or module._forward_pre_hooks or "forward" in module.__dict__
                or _nn_module._global_forward_hooks or _nn_module._global_forward_pre_hooks)


def name_of_type(act_type: type) -> str | None:
    """The activation a module type computes, or None. A subclass counts only if it computes the
    same thing: one that overrides ``forward`` (a clamped SwiGLU, say) is another activation."""
    for a in ACTIVATIONS.values():
        if issubclass(act_type, a.module_type) and act_type.forward is a.module_type.forward:
            return a.name
    return ALIASES.get(f"{act_type.__module__}.{act_type.__qualname__}")
