"""``triton_fp8`` producers: the shared Triton act+quant kernels for every activation x key.

Registered whatever the platform (no triton import here); the support predicate
declines inputs the kernels do not take, which then fall back.
"""

from __future__ import annotations

import functools

from fused_quant import keys as K
from fused_quant.backends.fallback.producers import produce
from fused_quant.kernels.launch import triton_supported
from fused_quant.registry import act_types, register_producer

BACKEND = "triton_fp8"


for _act, _type in act_types().items():
    for _key in K.KEYS.values():
        register_producer(_type, _key, backend=BACKEND, supported=triton_supported)(
            functools.partial(produce, _act, key=_key))
