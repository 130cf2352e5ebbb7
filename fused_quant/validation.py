"""Error types and every input check of the library.

Per-call checks read metadata only (dtype, rank, shape, device, strides): no
host-device sync, so they are CUDA-graph safe. Values of static scales are
checked once, when a scale is set (``check_static_scale_value``). Nothing here
uses ``assert``: ``python -O`` must not change what is accepted.
"""

from __future__ import annotations

from typing import Sequence

import torch

ACT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ACTIVATIONS = ("silu_and_mul", "relu2", "identity")


class FusedQuantError(Exception):
    """Base class of every error fused-quant raises on purpose."""


class ShapeMismatchError(FusedQuantError, ValueError):
    """Operand shapes do not agree; carries M, N, K and both shapes when known."""

    def __init__(self, message: str, *, layer: str | None = None, m: int | None = None,
                 n: int | None = None, k: int | None = None, x_shape: Sequence[int] | None = None,
                 w_shape: Sequence[int] | None = None):
        super().__init__(message)
        self.layer, self.m, self.n, self.k = layer, m, n, k
        self.x_shape = tuple(x_shape) if x_shape is not None else None
        self.w_shape = tuple(w_shape) if w_shape is not None else None


class QuantDTypeError(FusedQuantError, TypeError):
    """A tensor has a dtype the operation does not accept."""


class BackendUnavailableError(FusedQuantError, RuntimeError):
    """A requested backend is unknown or cannot run on this node."""


class ScaleError(FusedQuantError, ValueError):
    """A scale has the wrong number of elements or a non-finite / non-positive value."""


class DeviceMismatchError(FusedQuantError, ValueError):
    """Operands live on different devices."""


class LayoutError(FusedQuantError, ValueError):
    """A tensor's strides are not what the kernel needs."""


class QuantKeyMismatchError(FusedQuantError, ValueError):
    """A pre-quantized activation carries a key its consumer does not accept."""


class NumericsProfileError(FusedQuantError, ValueError):
    """Unknown numerics profile name."""


class UnsupportedError(FusedQuantError, ValueError):
    """An activation, quant key or FP8 format fused-quant does not implement."""


class GemmProviderError(FusedQuantError, RuntimeError):
    """A GEMM provider failed or returned something other than what it must."""


def _where(layer: str | None) -> str:
    return f"{layer}: " if layer else ""


def check_tensor(x: object, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    return x


def check_activation(act: str) -> str:
    if act not in ACTIVATIONS:
        raise UnsupportedError(f"unknown activation {act!r}; expected one of {', '.join(ACTIVATIONS)}")
    return act


def check_activation_input(x: torch.Tensor, act: str) -> None:
    """dtype in {bf16, fp16, fp32}, rank >= 1, and an even last dim for silu_and_mul."""
    check_tensor(x, f"{act} input")
    if x.dtype not in ACT_DTYPES:
        raise QuantDTypeError(
            f"{act} input must be one of bfloat16, float16, float32; got {x.dtype} "
            f"(already-quantized or integer tensors cannot be activated)"
        )
    if x.dim() == 0:
        raise ShapeMismatchError(f"{act} input must have rank >= 1 (tokens x features); got a 0-d tensor")
    if x.shape[-1] == 0:
        raise ShapeMismatchError(f"{act} input's last dim (features) must be > 0; got shape {tuple(x.shape)}",
                                 x_shape=x.shape)
    if act == "silu_and_mul" and x.shape[-1] % 2 != 0:
        raise ShapeMismatchError(
            f"silu_and_mul input's last dim holds [gate | up] and must be even; got {x.shape[-1]} "
            f"(shape {tuple(x.shape)})",
            x_shape=x.shape,
        )


def check_scale_tensor(scale: object, *, device: torch.device, what: str = "static scale",
                       layer: str | None = None) -> torch.Tensor:
    """Metadata of a per-tensor scale: float32, one element, on ``device``."""
    if not isinstance(scale, torch.Tensor):
        raise TypeError(
            f"{_where(layer)}{what} must be a one-element float32 torch.Tensor, got {type(scale).__name__}"
        )
    if scale.dtype != torch.float32:
        raise QuantDTypeError(f"{_where(layer)}{what} must be float32, got {scale.dtype}")
    if scale.numel() != 1:
        raise ScaleError(
            f"{_where(layer)}{what} must have exactly 1 element, got {scale.numel()} (shape {tuple(scale.shape)})"
        )
    if scale.device != device:
        raise DeviceMismatchError(f"{_where(layer)}{what} is on {scale.device}, expected {device}")
    return scale


def check_static_scale_value(scale: torch.Tensor, *, what: str = "static scale",
                             layer: str | None = None) -> None:
    """Once, when a static scale is set: finite and > 0 (this reads the value).

    A scale on the meta device has no value (a layer built for deferred initialization);
    it is accepted here, and the real value is checked when it is set on a real device.
    """
    if scale.device.type == "meta":
        return
    value = float(scale.detach().reshape(-1)[0].item())
    if not (value > 0.0 and value != float("inf")):
        raise ScaleError(f"{_where(layer)}{what} must be finite and > 0, got {value!r}")

