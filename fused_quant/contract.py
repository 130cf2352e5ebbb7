"""The producer/consumer contract: ``QuantizedActivation`` and the input-quant-key bridge.

A linear advertises the key it can consume with ``expose_input_quant_key``;
producers ask ``get_input_quant_key`` (None when the layer needs the raw
activation, e.g. LoRA); a consumer narrows its input with
``as_quantized_activation``, which raises on a key mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fused_quant.keys import QuantKey, label, normalize_key, to_quant_key
from fused_quant.validation import QuantKeyMismatchError, described


@dataclass
class QuantizedActivation:
    """A quantized activation with its scale and the metadata of what it replaces.

    ``data`` has the consumer's K as its last dim; ``scale`` is ``[*lead, 1]``
    float32 for per-token keys and a one-element float32 tensor for per-tensor
    keys. ``orig_shape`` / ``orig_dtype`` describe the unquantized activation.
    """

    data: torch.Tensor
    scale: torch.Tensor
    orig_dtype: torch.dtype
    orig_shape: torch.Size
    quant_key: QuantKey

    def __post_init__(self) -> None:
        """A key given by name (or another library's key, matched by value) is held as the ``QuantKey``, so that it
        compares equal to the library's keys; the parts are checked against the key by the consumer, which names
        the layer."""
        if type(self.quant_key) is not QuantKey:
            self.quant_key = to_quant_key(self.quant_key, "QuantizedActivation.quant_key")
        if (type(self.data) is not torch.Tensor or type(self.scale) is not torch.Tensor) and not (  # plain: one test
                isinstance(self.data, torch.Tensor) and isinstance(self.scale, torch.Tensor)):
            raise TypeError(f"QuantizedActivation: data and scale must be tensors, got {type(self.data).__name__} and "
                            f"{type(self.scale).__name__}")


def expose_input_quant_key(layer: torch.nn.Module, key_or_kernel: object) -> None:
    """Record on ``layer`` the pre-quantized input key it can consume.

    Accepts a ``QuantKey``, a key name, a key of another library with the same fields, or, like
    vLLM, a kernel object with ``input_quant_key()``; a kernel that returns None (it quantizes its
    own input) leaves the layer unset, a key exposed before taken away (producers would otherwise go on
    sending it quantized activations).
    """
    if not isinstance(layer, torch.nn.Module):
        raise TypeError(f"expose_input_quant_key: layer must be a torch.nn.Module, got {type(layer).__name__}")
    if hasattr(key_or_kernel, "input_quant_key"):  # a kernel, as vLLM's
        if not callable(key_or_kernel.input_quant_key):
            raise TypeError(f"expose_input_quant_key: a kernel's input_quant_key must be a method returning its key "
                            f"or None, got {type(key_or_kernel.input_quant_key).__name__} on "
                            f"{type(key_or_kernel).__name__}")
        key = key_or_kernel.input_quant_key()
    else:
        key = key_or_kernel
    if key is None:
        layer.__dict__.pop("_input_quant_key", None)
        return
    layer._input_quant_key = to_quant_key(key, "expose_input_quant_key: key")  # producers may lack it: fall back


def get_input_quant_key(layer: torch.nn.Module | None) -> QuantKey | None:
    """The key a producer may target for ``layer`` (a module, or None); None if it needs the unquantized input."""
    if layer is None:
        return None
    key = getattr(layer, "_input_quant_key", None)
    if key is None:
        # e.g. a layer's name passed for the layer (a consumer of another kind says what it needs)
        if not isinstance(layer, torch.nn.Module) and not hasattr(layer, "requires_unquantized_input"):
            raise TypeError(f"the consumer layer must be a torch.nn.Module or None, got {described(layer)}")
        return None
    return None if getattr(layer, "requires_unquantized_input", False) else key


def as_quantized_activation(x: torch.Tensor | QuantizedActivation,
                            expected_key: QuantKey | None) -> QuantizedActivation | None:
    """``x`` itself when it is a QuantizedActivation for ``expected_key``; None for a plain tensor.

    Raises QuantKeyMismatchError when the keys differ, so a wrongly routed
    activation fails loudly instead of being re-quantized or misread.
    """
    if not isinstance(x, QuantizedActivation):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"as_quantized_activation: x must be a tensor or a QuantizedActivation, got "
                            f"{type(x).__name__}")
        if expected_key is not None:  # a value that is no key is refused for plain tensors too
            to_quant_key(expected_key, "as_quantized_activation: expected_key")
        return None
    carried = to_quant_key(x.quant_key, "QuantizedActivation.quant_key")
    if expected_key is None or normalize_key(carried) != normalize_key(to_quant_key(expected_key, "consumer key")):
        raise QuantKeyMismatchError(
            f"QuantizedActivation carries key {label(x.quant_key)}, but its consumer accepts {label(expected_key)}"
        )
    return x
