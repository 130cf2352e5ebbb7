"""``torch`` backend producers: the reference itself, for every activation x key, on any device.

They run through the same custom ops as the Triton backends, so under
``torch.compile`` the spec stays one opaque eager op (Inductor would otherwise
drop the activation's rounding to T and change bits).
"""

from __future__ import annotations

import functools

from fused_quant import keys as K
from fused_quant.ops import act_quant
from fused_quant.registry import act_types, register_producer

BACKEND = "torch"


def produce(act, x, scale, *, numerics, fp8_dtype, key):
    return act_quant(x, act, key, scale, numerics.round_silu_product, fp8_dtype)


for _act, _type in act_types().items():
    for _key in K.KEYS.values():
        register_producer(_type, _key, backend=BACKEND)(functools.partial(produce, _act, key=_key))
