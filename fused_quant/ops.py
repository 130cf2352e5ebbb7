"""``torch.library`` custom ops around the act+quant producers, with fake implementations.

``fused_quant::act_quant_static`` returns q (the static scale is the caller's own tensor,
returned by the Python wrapper: an op output may not alias an input);
``fused_quant::act_quant_token`` returns (q, scale). Both take the name of the
implementation that computes them (``IMPLS``): ``"torch"`` is the reference (pure torch,
any device); a backend that has kernels registers its own (``register_impl``). Opaque to
Dynamo, so ``torch.compile`` and CUDA graphs see one op, never its internals.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch

from fused_quant import activations
from fused_quant import keys as K
from fused_quant.gemm import GEMM_OPERANDS, checked_gemm, inference_only
from fused_quant.numerics import DEFAULT, HCU
from fused_quant.reference import act_quant_unchecked
from fused_quant.registry import act_types, register_producer
from fused_quant.validation import check_gemm_operands

FP8_NAMES = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
_FP8_TO_NAME = {v: k for k, v in FP8_NAMES.items()}

# (x, scale, act, key, round_product, fp8_dtype) -> (q, scale), for validated input
ImplFn = Callable[..., "tuple[torch.Tensor, torch.Tensor]"]


def reference_impl(x, scale, act, key, round_product, fp8_dtype):
    """The spec in pure torch on ``x``'s device (the ``torch`` backend's implementation)."""
    q, s = act_quant_unchecked(act, x, key, scale, DEFAULT if round_product else HCU, fp8_dtype)
    # elementwise torch ops keep a permuted input's strides; consumers need row-major data
    return q.contiguous(), (s.contiguous() if K.is_per_token(key) else s)


IMPLS: dict[str, ImplFn] = {"torch": reference_impl}


def register_impl(name: str, fn: ImplFn) -> None:
    """Make ``fn`` the implementation the custom ops run for ``impl=name``."""
    IMPLS[name] = fn


def _out_shape(x: torch.Tensor, act: str) -> tuple[int, ...]:
    return (*x.shape[:-1], activations.out_features(act, x.shape[-1]))


def _compute_named(x, scale, act, key_name, round_product, fp8, impl):
    return IMPLS[impl](x, scale, act, K.key_from_name(key_name), round_product, FP8_NAMES[fp8])


@torch.library.custom_op("fused_quant::act_quant_static", mutates_args=())
def act_quant_static(x: torch.Tensor, scale: torch.Tensor, act: str, key: str, round_product: bool,
                     fp8: str, impl: str) -> torch.Tensor:
    return _compute_named(x, scale, act, key, round_product, fp8, impl)[0]


@act_quant_static.register_fake
def _act_quant_static_fake(x, scale, act, key, round_product, fp8, impl):
    return x.new_empty(_out_shape(x, act), dtype=K.storage_dtype(K.key_from_name(key), FP8_NAMES[fp8]))


@torch.library.custom_op("fused_quant::act_quant_token", mutates_args=())
def act_quant_token(x: torch.Tensor, act: str, key: str, round_product: bool,
                    fp8: str, impl: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _compute_named(x, None, act, key, round_product, fp8, impl)


@act_quant_token.register_fake
def _act_quant_token_fake(x, act, key, round_product, fp8, impl):
    shape = _out_shape(x, act)
    q = x.new_empty(shape, dtype=K.storage_dtype(K.key_from_name(key), FP8_NAMES[fp8]))
    return q, x.new_empty((*shape[:-1], 1), dtype=torch.float32)


@torch.library.custom_op("fused_quant::quant_gemm", mutates_args=())
def quant_gemm_op(x: torch.Tensor, xs: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, bias: Optional[torch.Tensor],
                  out_dtype: torch.dtype, key: str, layer: str, backend: str) -> torch.Tensor:
    return checked_gemm(x, xs, w, ws, bias, out_dtype, key, layer, backend)


@quant_gemm_op.register_fake
def _quant_gemm_fake(x, xs, w, ws, bias, out_dtype, key, layer, backend):
    p = check_gemm_operands(x, xs, K.key_from_name(key), w, ws, bias, out_dtype, layer or None)
    return x.new_empty((*x.shape[:-1], p.n), dtype=out_dtype)


def _quant_gemm_setup(ctx, inputs, output) -> None:
    ctx.operands, ctx.layer = inputs[:5], inputs[7]


def _quant_gemm_backward(ctx, grad):
    """Compiled, a call whose operands require grad runs (an error raised while it is traced would break the
    graph); the gradient it would need is refused here, as the eager call refuses the call."""
    raise inference_only(ctx.layer or None, [name for name, t in zip(GEMM_OPERANDS, ctx.operands)
                                             if isinstance(t, torch.Tensor) and t.requires_grad])


quant_gemm_op.register_autograd(_quant_gemm_backward, setup_context=_quant_gemm_setup)


def act_quant(x: torch.Tensor, act: str, key: K.QuantKey, scale: torch.Tensor | None, round_product: bool,
              fp8_dtype: torch.dtype, impl: str = "torch") -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale) for validated input: the custom ops under torch.compile, a direct call in eager
    (same code, without the op dispatch cost that dominates at small M)."""
    if not torch.compiler.is_compiling():
        return IMPLS[impl](x, scale, act, key, round_product, fp8_dtype)
    name, fp8 = K.key_name(key), _FP8_TO_NAME[fp8_dtype]
    if K.is_static(key):
        return act_quant_static(x, scale, act, name, round_product, fp8, impl), scale
    return act_quant_token(x, act, name, round_product, fp8, impl)


def _produce(act, x, scale, *, numerics, fp8_dtype, key, impl):
    return act_quant(x, act, key, scale, numerics.round_silu_product, fp8_dtype, impl)


def bind_reference(act: str, key: K.QuantKey):
    """The ``torch`` backend's ``bind``: the reference, for every input with the checked metadata."""
    def bind(x, scale, *, numerics, fp8_dtype):
        round_product = numerics.round_silu_product
        return lambda x, scale: reference_impl(x, scale, act, key, round_product, fp8_dtype)

    return bind


def register_every_producer(backend: str, impl: str, supported_for: Callable = lambda key: None,
                            bind_for: Callable | None = None) -> None:
    """Register the custom-op producer running ``impl`` for every activation x key on ``backend``.

    ``supported_for(key)`` gives each key's support predicate; ``bind_for(act, key)``, optional,
    each producer's ``bind`` (its work resolved once per input signature, see ``register_producer``).
    """
    for act, act_type in act_types().items():
        for key in K.KEYS.values():
            register_producer(act_type, key, backend=backend, supported=supported_for(key),
                              bind=bind_for(act, key) if bind_for else None)(
                functools.partial(_produce, act, key=key, impl=impl))
