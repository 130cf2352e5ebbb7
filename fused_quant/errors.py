"""Every error type fused-quant raises on purpose (the bottom of the package: imports nothing of it).

All derive from ``FusedQuantError`` and from the builtin a caller would expect
(``ValueError`` for bad values and shapes, ``TypeError`` for dtypes, ``RuntimeError``
for what cannot run here).
"""

from __future__ import annotations

from typing import Sequence


class FusedQuantError(Exception):
    """Base class of every error fused-quant raises on purpose."""


class ShapeMismatchError(FusedQuantError, ValueError):
    """Operand shapes do not agree; carries M, N, K and both shapes when known."""

    def __init__(self, message: str, *, layer: str | None = None, m: int | None = None,
                 n: int | None = None, k: int | None = None, x_shape: Sequence[int] | None = None,
                 w_shape: Sequence[int] | None = None):
        # the message set as the exception's argument, not by a super().__init__ call, which torch.compile cannot
        # trace (it would then report no message at all)
        self.args = (message,)
        self.layer, self.m, self.n, self.k = layer, m, n, k
        self.x_shape = tuple(x_shape) if x_shape is not None else None
        self.w_shape = tuple(w_shape) if w_shape is not None else None


class QuantDTypeError(FusedQuantError, TypeError):
    """A tensor has a dtype the operation does not accept."""


class BackendUnavailableError(FusedQuantError, RuntimeError):
    """A requested backend is unknown or cannot run on this node."""


class ScaleError(FusedQuantError, ValueError):
    """A scale has the wrong number of elements or shape, or a value it may not hold: a static input scale not
    finite or below float32's smallest normal, a weight scale not finite or negative (0 is a zero row's); also a
    float weight that is not finite where scales are computed from it (``from_float``, ``quantize_model``)."""


class BiasError(FusedQuantError, ValueError):
    """A layer's bias has a value it cannot hold: not finite in the layer's output dtype."""


class DeviceMismatchError(FusedQuantError, ValueError):
    """Operands live on different devices."""


class LayoutError(FusedQuantError, ValueError):
    """A tensor's layout is not one the operation takes: strides the kernel cannot read, or a sparse or nested
    tensor where a dense one belongs."""


class QuantKeyMismatchError(FusedQuantError, ValueError):
    """A pre-quantized activation carries a key its consumer does not accept."""


class NumericsProfileError(FusedQuantError, ValueError):
    """Unknown numerics profile name."""


class UnsupportedError(FusedQuantError, ValueError):
    """What fused-quant does not do: an activation, quant key or FP8 format it does not implement, inputs that
    require grad (quantization has no gradient), TorchScript, a layer's ``input_key`` changed after it is built,
    a NaN FP8 weight code, a transformers / compressed-tensors version outside the tested range, a checkpoint
    scheme it does not read."""


class GemmProviderError(FusedQuantError, RuntimeError):
    """A GEMM provider failed or returned something other than what it must, or a registration mistake: a
    provider's functions taking other arguments than they will get, a name of another kind reused, a name to
    unregister that no provider has."""


class ProducerError(FusedQuantError, RuntimeError):
    """A registered producer or its support predicate returned something other than what its contract says, or a
    registration mistake: a producer registered twice without ``replace=True``, functions taking other arguments
    than they will get, an unregistration the table cannot make (the torch backend's own producers stay)."""
