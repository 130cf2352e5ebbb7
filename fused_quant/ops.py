"""``torch.library`` custom ops around the act+quant producers, with fake implementations.

``fused_quant::act_quant_static`` returns q (the static scale is the caller's
own tensor, returned by the Python wrapper: an op output may not alias an
input); ``fused_quant::act_quant_token`` returns (q, scale). On GPU tensors
they launch the Triton kernels; on others they run the reference. Opaque to
Dynamo, so ``torch.compile`` and CUDA graphs see one op, never its internals.
"""

from __future__ import annotations

from typing import Optional

import torch

from fused_quant import keys as K
from fused_quant.kernels import launch
from fused_quant.numerics import DEFAULT, HCU
from fused_quant.reference import act_quant_unchecked

FP8_NAMES = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
_FP8_TO_NAME = {v: k for k, v in FP8_NAMES.items()}


def _out_shape(x: torch.Tensor, act: str) -> tuple[int, ...]:
    d = x.shape[-1] // 2 if act == "silu_and_mul" else x.shape[-1]
    return (*x.shape[:-1], d)


def _compute(x, scale, act, key, round_product, fp8_dtype):
    """The Triton kernels for GPU rows, else the reference."""
    bound = bind(x, act, key, round_product, fp8_dtype)
    if bound is not None:
        return bound(x, scale)
    q, s = act_quant_unchecked(act, x, key, scale, DEFAULT if round_product else HCU, fp8_dtype)
    # elementwise torch ops keep a permuted input's strides; consumers need row-major data
    return q.contiguous(), (s.contiguous() if K.is_per_token(key) else s)


def bind(x: torch.Tensor, act: str, key: K.QuantKey, round_product: bool, fp8_dtype: torch.dtype):
    """``_compute`` resolved once for every input with ``x``'s metadata: the Triton launch bound to
    it (``(x, scale) -> (q, scale)``) for GPU rows; None otherwise."""
    rows = launch.rows_view(x) if x.is_cuda else None
    if rows is None:
        return None
    return launch.bind_rows(x, rows, act, K.key_name(key), round_product, fp8_dtype)


def _compute_named(x, scale, act, key_name, round_product, fp8):
    return _compute(x, scale, act, K.key_from_name(key_name), round_product, FP8_NAMES[fp8])


@torch.library.custom_op("fused_quant::act_quant_static", mutates_args=())
def act_quant_static(x: torch.Tensor, scale: torch.Tensor, act: str, key: str, round_product: bool,
                     fp8: str) -> torch.Tensor:
    return _compute_named(x, scale, act, key, round_product, fp8)[0]


@act_quant_static.register_fake
def _act_quant_static_fake(x, scale, act, key, round_product, fp8):
    return x.new_empty(_out_shape(x, act), dtype=K.storage_dtype(K.key_from_name(key), FP8_NAMES[fp8]))


@torch.library.custom_op("fused_quant::act_quant_token", mutates_args=())
def act_quant_token(x: torch.Tensor, act: str, key: str, round_product: bool,
                    fp8: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _compute_named(x, None, act, key, round_product, fp8)


@act_quant_token.register_fake
def _act_quant_token_fake(x, act, key, round_product, fp8):
    shape = _out_shape(x, act)
    q = x.new_empty(shape, dtype=K.storage_dtype(K.key_from_name(key), FP8_NAMES[fp8]))
    return q, x.new_empty((*shape[:-1], 1), dtype=torch.float32)


@torch.library.custom_op("fused_quant::quant_gemm", mutates_args=())
def quant_gemm_op(x: torch.Tensor, xs: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, bias: Optional[torch.Tensor],
                  out_dtype: torch.dtype, key: str, layer: str, backend: str) -> torch.Tensor:
    from fused_quant.gemm import checked_gemm

    return checked_gemm(x, xs, w, ws, bias, out_dtype, key, layer, backend)


@quant_gemm_op.register_fake
def _quant_gemm_fake(x, xs, w, ws, bias, out_dtype, key, layer, backend):
    from fused_quant.gemm import check_gemm_operands

    p = check_gemm_operands(x, xs, K.key_from_name(key), w, ws, bias, out_dtype, layer or None)
    return x.new_empty((*x.shape[:-1], p.n), dtype=out_dtype)


def act_quant(x: torch.Tensor, act: str, key: K.QuantKey, scale: torch.Tensor | None, round_product: bool,
              fp8_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale) for validated input: the custom ops under torch.compile, a direct call in eager
    (same code, without the op dispatch cost that dominates at small M)."""
    if not torch.compiler.is_compiling():
        return _compute(x, scale, act, key, round_product, fp8_dtype)
    name, fp8 = K.key_name(key), _FP8_TO_NAME[fp8_dtype]
    if K.is_static(key):
        return act_quant_static(x, scale, act, name, round_product, fp8), scale
    return act_quant_token(x, act, name, round_product, fp8)
