"""The Triton act+quant kernels as producers: the ``"triton"`` implementation of the custom ops and
the per-signature binding, shared by the ``triton_fp8`` and ``hip_w8a8`` backends.

Rows the kernels cannot read without a copy (and tensors off the GPU) never reach them: the
backends' support predicate (``launch.triton_supported``) declines those, so the ``torch``
backend computes them; inside a compiled graph the same rows take the reference (same bits).
"""

from __future__ import annotations

import torch

from fused_quant import keys as K
from fused_quant import ops
from fused_quant.kernels import launch

IMPL = "triton"


def bind(x: torch.Tensor, act: str, key: K.QuantKey, round_product: bool, fp8_dtype: torch.dtype):
    """The Triton launch bound to every input with ``x``'s metadata (``(x, scale) -> (q, scale)``),
    or None for input the kernels do not read (not on the GPU, or rows that need a copy)."""
    rows = launch.rows_view(x) if x.is_cuda else None
    if rows is None:
        return None
    return launch.bind_rows(x, rows, act, K.key_name(key), round_product, fp8_dtype)


def triton_impl(x, scale, act, key, round_product, fp8_dtype):
    bound = bind(x, act, key, round_product, fp8_dtype)
    if bound is None:
        return ops.reference_impl(x, scale, act, key, round_product, fp8_dtype)
    return bound(x, scale)


def _bind_producer(act: str, key: K.QuantKey):
    def bind_producer(x, scale, *, numerics, fp8_dtype):
        return bind(x, act, key, numerics.round_silu_product, fp8_dtype)

    return bind_producer


ops.register_impl(IMPL, triton_impl)


def register_triton_producers(backend: str, supported_for) -> None:
    """Register the Triton producers for every activation x key on ``backend``, each bound per call
    signature; ``supported_for(key)`` gives each key's support predicate."""
    ops.register_every_producer(backend, IMPL, supported_for, _bind_producer)
