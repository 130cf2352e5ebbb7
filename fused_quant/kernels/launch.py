"""Host side of the Triton act+quant kernels: support predicate, allocation, launch.

Shared by the ``triton_fp8`` and ``hip_w8a8`` producers. Triton is imported on
first launch, never at import. Input rows may have a stride (a 2-D view with
``stride(-1) == 1``); anything that cannot be viewed as ``[M, D]`` rows without
a copy is declined by ``triton_supported`` so the torch backend computes it.
"""

from __future__ import annotations

import functools

import torch

from fused_quant import keys as K
from fused_quant.kernels import heuristics
from fused_quant.reference import FP8_NAN_CODE, fp8_min_scale

ACT_CODES = {"identity": 0, "relu2": 1, "silu_and_mul": 2}
QUANT_CODES = {"fp8_static_tensor": 0, "fp8_dynamic_token": 1, "int8_static_tensor": 2, "int8_dynamic_token": 3}
KERNEL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def rows_view(x: torch.Tensor) -> torch.Tensor | None:
    """``x`` as ``[M, D_in]`` rows with unit column stride, without copying; None if impossible."""
    if x.stride(-1) != 1 and x.shape[-1] != 1:
        return None
    if x.dim() == 2:
        return x
    try:
        return x.view(-1, x.shape[-1])
    except RuntimeError:
        return None


def triton_supported(x: torch.Tensor, scale: torch.Tensor | None) -> tuple[bool, str]:
    if x.device.type != "cuda":
        return False, f"Triton kernels run on GPU tensors; input is on {x.device}"
    if x.dtype not in KERNEL_DTYPES:
        return False, f"Triton kernels take bf16/fp16/fp32; input is {x.dtype}"
    if rows_view(x) is None:
        return False, f"input strides {x.stride()} cannot be read as rows without a copy"
    return True, ""


@functools.cache
def _tl():
    import triton.language as tl

    from fused_quant.kernels.triton import act_quant

    dtypes = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32,
              torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e4m3fnuz: tl.float8e4b8}
    return act_quant, dtypes


def _arch() -> str | None:
    from fused_quant.platforms import current_platform

    return current_platform().arch


@functools.lru_cache(maxsize=None)
def _constexprs(act: str, key_name: str, x_dtype: torch.dtype, round_product: bool, fp8_dtype: torch.dtype,
                fast_div: bool) -> dict:
    """The kernels' compile-time arguments for one producer (built once; callers must not mutate)."""
    _, tl_dtypes = _tl()
    key = K.key_from_name(key_name)
    fp8 = K.is_fp8(key)
    out = dict(
        ACT=ACT_CODES[act], QUANT=QUANT_CODES[key_name], T=tl_dtypes[x_dtype], ROUND_PRODUCT=round_product,
        M8=K.fp8_max(fp8_dtype) if fp8 else 127.0, FP8=tl_dtypes[fp8_dtype], NAN_CODE=FP8_NAN_CODE[fp8_dtype],
        FAST_DIV=fast_div,
    )
    if K.is_per_token(key):
        out["MIN_SCALE"] = fp8_min_scale(fp8_dtype)
    return out


def launch_act_quant(x: torch.Tensor, act: str, key: K.QuantKey, scale: torch.Tensor | None,
                     round_product: bool, fp8_dtype: torch.dtype,
                     config: dict[str, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run one producer kernel; returns (q, scale) with q ``[*lead, D]``, per-token scale ``[*lead, 1]``.

    ``config`` overrides the heuristics (tuning only).
    """
    kernels, tl_dtypes = _tl()
    x2 = rows_view(x)
    d_in = x2.shape[1]
    d = d_in // 2 if act == "silu_and_mul" else d_in
    m = x2.shape[0]
    lead = tuple(x.shape[:-1])
    qdtype = K.storage_dtype(key, fp8_dtype)
    q = torch.empty((*lead, d), dtype=qdtype, device=x.device)
    per_token = K.is_per_token(key)
    s = torch.empty((*lead, 1), dtype=torch.float32, device=x.device) if per_token else scale
    if m == 0:
        return q, s
    fp8 = K.is_fp8(key)
    config = dict(config) if config else None
    fast_div = bool(config.pop("fast_div", 1)) if config else True
    common = _constexprs(act, K.key_name(key), x.dtype, round_product, fp8_dtype, fast_div)
    q_out = q.view(torch.uint8) if fp8 else q
    arch = _arch()
    if not per_token:
        cfg = dict(config) if config else heuristics.static_launch(m, d, arch, act)
        if cfg.pop("flat", 0):
            tile = {"BLOCK_M": cfg.pop("BLOCK_M", 1), "BLOCK_N": cfg.pop("BLOCK_N", 1024),
                    "num_warps": cfg.pop("tile_warps", cfg["num_warps"])}
            if act != "silu_and_mul" and x2.stride(0) == d:
                n = m * d
                kernels.act_quant_static_flat_kernel[(triton_cdiv(n, cfg["BLOCK"]),)](
                    x2, q_out, scale, n, **common, **cfg)
                return q, s
            cfg = tile  # strided rows: the tile kernel
        grid = (triton_cdiv(m, cfg["BLOCK_M"]), triton_cdiv(d, cfg["BLOCK_N"]))
        kernels.act_quant_static_kernel[grid](x2, q_out, scale, m, d, x2.stride(0), **common, **cfg)
        return q, s
    cfg = dict(config) if config else heuristics.token_launch(m, d, arch, act)
    variant = cfg.pop("two_pass")
    if variant:
        cfg.setdefault("STAGES", 1)
    if variant == 2:
        # persistent: programs_per_sm programs per SM loop over rows; y parked in scratch rows
        grid = (max(1, min(m, _num_sms(x.device) * cfg.pop("programs_per_sm"))),)
        scratch = cfg.pop("scratch")
        ydtype = x.dtype if (round_product or act != "silu_and_mul") else torch.float32
        y = torch.empty((grid[0], d) if scratch else (1,), dtype=ydtype, device=x.device)
        kernels.act_quant_token_persistent_kernel[grid](
            x2, q_out, s, y, m, d, x2.stride(0), **common, USE_SCRATCH=bool(scratch), Y=tl_dtypes[ydtype], **cfg)
    elif variant == 1:
        kernels.act_quant_token_2pass_kernel[(m,)](x2, q_out, s, m, d, x2.stride(0), **common, **cfg)
    else:
        grid = (triton_cdiv(m, cfg["ROWS"]),)
        kernels.act_quant_token_kernel[grid](x2, q_out, s, m, d, x2.stride(0), **common, **cfg)
    return q, s


@functools.cache
def _num_sms_cached(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":  # the Triton interpreter runs kernels on CPU tensors
        return 2
    return _num_sms_cached(device.index if device.index is not None else torch.cuda.current_device())


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
