"""``torch`` backend producers: the reference itself, for every activation x key, on any device.

Pure torch (never Triton), through the same custom ops as the other backends, so under
``torch.compile`` the spec stays one opaque eager op (Inductor would otherwise drop the
activation's rounding to T and change bits). In eager mode a call signature checked once runs
the reference directly (``ops.bind_reference``).
"""

from __future__ import annotations

from fused_quant import ops

BACKEND = "torch"

ops.register_every_producer(BACKEND, "torch", bind_for=ops.bind_reference)
