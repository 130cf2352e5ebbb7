"""``torch`` backend producers: the reference itself, for every activation x key, any device."""

from __future__ import annotations

import functools

from fused_quant import keys as K
from fused_quant.reference import act_quant_unchecked
from fused_quant.registry import act_types, register_producer

BACKEND = "torch"


def _produce(act, x, scale, *, numerics, fp8_dtype, key):
    return act_quant_unchecked(act, x, key, scale, numerics, fp8_dtype)


for _act, _type in act_types().items():
    for _key in K.KEYS.values():
        register_producer(_type, _key, backend=BACKEND)(functools.partial(_produce, _act, key=_key))
