"""Launch heuristics for the Triton act+quant kernels, as data per arch.

Static keys: rows ``(max_m, BLOCK_M, BLOCK_N, num_warps)``, the first row whose max_m >= M
wins; silu_and_mul (exp + IEEE division per element) has its own rows; contiguous relu2 /
identity input from ``static_flat``'s M on runs as one flat vector. Per-token keys: rows
narrower than ``one_pass_max_n`` stay in registers (one pass, ``token_one_pass_warps``);
wider rows use the persistent two-sweep kernel with L2-resident scratch rows and
compiler-pipelined chunk loads, except relu2/identity (no transcendental work), whose rows
up to 16384 still fit one pass, and silu_and_mul at small M (``token_small_m``), where one
row per program in registers beats the persistent kernel's serial sweeps.
Archs not listed use "default". Numbers behind the choices: benchmarks/RESULTS.md
(benchmarks/tune_act_quant.py on the H200, M = 8192, H = 14336; benchmarks/results/tune_*.txt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ArchConfig:
    static_rows: tuple[tuple[int, int, int, int], ...]
    static_flat: tuple[int, int, int]  # (min M, BLOCK, num_warps): contiguous relu2/identity as one flat vector
    static_rows_silu: tuple[tuple[int, int, int, int], ...]
    one_pass_max_n: int  # widest per-token row kept in registers (silu_and_mul)
    one_pass_max_n_cheap: int  # the same for relu2 / identity
    token_one_pass_warps: tuple[tuple[int, int], ...]  # (max BLOCK_N, num_warps)
    token_small_m: tuple[int, int, int]  # silu_and_mul one pass up to (M, BLOCK_N), with num_warps
    persistent: tuple[int, int, int, int]  # (BLOCK_N, num_warps, programs per SM, pipeline stages)
    two_pass_block_n: int  # non-persistent two-pass kernel (kept for tuning comparisons)


_DEFAULT = ArchConfig(
    static_rows=((16, 1, 256, 2), (256, 1, 1024, 4), (1 << 62, 8, 1024, 8)),
    static_flat=(257, 4096, 4),
    static_rows_silu=((16, 1, 256, 2), (1 << 62, 1, 1024, 4)),
    one_pass_max_n=4096,
    one_pass_max_n_cheap=16384,
    token_one_pass_warps=((1024, 4), (1 << 62, 8)),
    token_small_m=(64, 16384, 32),
    persistent=(2048, 8, 8, 3),
    two_pass_block_n=2048,
)

CONFIGS: dict[str, ArchConfig] = {"default": _DEFAULT, "sm_90": _DEFAULT}


def config_for(arch: str | None) -> ArchConfig:
    return CONFIGS.get(arch or "default", _DEFAULT)


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def static_launch(m: int, d: int, arch: str | None, act: str = "relu2") -> dict[str, int]:
    """Tile config; for relu2/identity from ``static_flat``'s min M on, the flat kernel (the
    launcher uses it only when rows are contiguous, else falls back to the tile rows)."""
    cfg = config_for(arch)
    min_m, block, warps = cfg.static_flat
    if act != "silu_and_mul" and m >= min_m:
        rows = cfg.static_rows
        tile = next(r for r in rows if m <= r[0])
        return {"flat": 1, "BLOCK": block, "num_warps": warps,
                "BLOCK_M": tile[1], "BLOCK_N": min(tile[2], next_pow2(d)), "tile_warps": tile[3]}
    rows = cfg.static_rows_silu if act == "silu_and_mul" else cfg.static_rows
    for max_m, block_m, block_n, warps in rows:
        if m <= max_m:
            break
    return {"BLOCK_M": block_m, "BLOCK_N": min(block_n, next_pow2(d)), "num_warps": warps}


def token_launch(m: int, d: int, arch: str | None, act: str = "relu2") -> dict[str, int]:
    """``{"two_pass": 0, ROWS, BLOCK_N, num_warps}`` (one pass) or
    ``{"two_pass": 2, BLOCK_N, num_warps, programs_per_sm, scratch}`` (persistent)."""
    cfg = config_for(arch)
    limit = cfg.one_pass_max_n if act == "silu_and_mul" else cfg.one_pass_max_n_cheap
    small_m, small_n, small_warps = cfg.token_small_m
    if act == "silu_and_mul" and limit < d and m <= small_m and next_pow2(d) <= small_n:
        return {"two_pass": 0, "ROWS": 1, "BLOCK_N": next_pow2(d), "num_warps": small_warps}
    if d <= limit:
        block_n = next_pow2(d)
        rows = max(1, min(64, 2048 // block_n))
        for max_n, warps in cfg.token_one_pass_warps:
            if block_n <= max_n:
                break
        return {"two_pass": 0, "ROWS": rows, "BLOCK_N": block_n, "num_warps": warps}
    block_n, warps, per_sm, stages = cfg.persistent
    return {"two_pass": 2, "BLOCK_N": block_n, "num_warps": warps, "programs_per_sm": per_sm, "scratch": 1,
            "STAGES": stages}
