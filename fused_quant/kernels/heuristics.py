"""Launch heuristics for the Triton act+quant kernels, as data per arch.

Rows: (max_m, BLOCK_M, BLOCK_N, num_warps) for static tiles, the first row
whose max_m >= M wins; per-token rows keep the whole row in registers up to
``one_pass_max_n`` and use the two-pass kernel beyond. Archs not listed use
"default". Measured on the H200: see benchmarks/RESULTS.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import math


@dataclass(frozen=True)
class ArchConfig:
    static_rows: tuple[tuple[int, int, int, int], ...]
    one_pass_max_n: int
    two_pass_block_n: int
    token_elems_per_thread: int  # per-token one-pass: warps = BLOCK_N / (32 * this)
    token_max_warps: int
    token_rows_target: int  # rows per program so one program covers ~this many elements


_DEFAULT = ArchConfig(
    static_rows=((16, 1, 256, 2), (256, 4, 1024, 4), (1 << 62, 8, 1024, 8)),
    one_pass_max_n=32768,
    two_pass_block_n=4096,
    token_elems_per_thread=16,
    token_max_warps=16,
    token_rows_target=2048,
)

CONFIGS: dict[str, ArchConfig] = {"default": _DEFAULT, "sm_90": _DEFAULT, "sm_100": _DEFAULT}


def config_for(arch: str | None) -> ArchConfig:
    return CONFIGS.get(arch or "default", _DEFAULT)


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def static_launch(m: int, d: int, arch: str | None) -> dict[str, int]:
    cfg = config_for(arch)
    for max_m, block_m, block_n, warps in cfg.static_rows:
        if m <= max_m:
            break
    block_n = min(block_n, next_pow2(d))
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps}


def token_launch(m: int, d: int, arch: str | None) -> dict[str, int]:
    """``{"two_pass": 0|1, ...}``: one-pass rows-per-program config, or the two-pass block."""
    cfg = config_for(arch)
    if d > cfg.one_pass_max_n:
        return {"two_pass": 1, "BLOCK_N": cfg.two_pass_block_n, "num_warps": 8}
    block_n = next_pow2(d)
    rows = max(1, min(next_pow2(cfg.token_rows_target // block_n), 64)) if block_n < cfg.token_rows_target else 1
    warps = max(1, min(cfg.token_max_warps, (rows * block_n) // (32 * cfg.token_elems_per_thread)))
    return {"two_pass": 0, "ROWS": rows, "BLOCK_N": block_n, "num_warps": next_pow2(warps)}
