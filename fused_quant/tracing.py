"""torch.compile friendliness without importing Dynamo at ``import fused_quant``.

``graph_constant(fn)`` marks a zero-argument function whose value is fixed for
the process (backend name, FP8 dtype, env choices) so Dynamo calls it once at
trace time and bakes the result in, instead of tracing probes, locks and env
reads. It sets the same marker as ``torch.compiler.assume_constant_result``
(``torch/_dynamo/decorators.py``), which would import Dynamo (and triton) eagerly.
"""

from __future__ import annotations

from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def graph_constant(fn: F) -> F:
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn
