"""``torch`` backend producers: the reference itself, for every activation x key, on any device.

They run through the same custom ops as the Triton backends, so under
``torch.compile`` the spec stays one opaque eager op (Inductor would otherwise
drop the activation's rounding to T and change bits).
"""

from __future__ import annotations

import functools

from fused_quant import keys as K
from fused_quant import ops
from fused_quant.ops import act_quant
from fused_quant.registry import act_types, register_producer

BACKEND = "torch"


def produce(act, x, scale, *, numerics, fp8_dtype, key):
    return act_quant(x, act, key, scale, numerics.round_silu_product, fp8_dtype)


def bind_produce(act, x, scale, *, numerics, fp8_dtype, key):
    """``produce`` bound to ``x``'s metadata where it launches a Triton kernel (the GPU backends)."""
    return ops.bind(x, act, key, numerics.round_silu_product, fp8_dtype)


def register_every_producer(backend: str, supported_for=lambda key: None, bound: bool = False) -> None:
    """Register ``produce`` for every activation x key on ``backend``; ``supported_for(key)`` gives each
    key's support predicate; ``bound``: with ``bind_produce`` (Triton launches bound per signature)."""
    for act, act_type in act_types().items():
        for key in K.KEYS.values():
            register_producer(act_type, key, backend=backend, supported=supported_for(key),
                              bind=functools.partial(bind_produce, act, key=key) if bound else None)(
                functools.partial(produce, act, key=key))


register_every_producer(BACKEND)
