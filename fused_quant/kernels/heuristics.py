"""Launch heuristics for the Triton act+quant kernels, as data per arch.

Static keys: rows ``(max_m, BLOCK_M, BLOCK_N, num_warps)``, the first row whose max_m >= M
wins; silu_and_mul (exp + IEEE division per element) has its own rows; contiguous relu2 /
identity input from ``static_flat``'s M on runs as one flat vector. Per-token keys: rows
up to ``one_pass_max_n`` stay in registers as one block (one pass, ``token_one_pass_warps``);
rows up to ``chunked_max_n`` stay in registers as chunks (one pass, one row per program, no
power-of-two padding) for relu2/identity and the cheap bf16 / fp16 silu (``FAST_SILU``) at every M
(on sm_90 but for the cheap silu's rows of 14336 at M = 224-256, one block per row there:
``silu_token_wide_rows``) and for the exact silu_and_mul at M up to 512; wider rows and the exact
silu_and_mul at larger M (accurate expf and IEEE division per element: the many registers of a row in flight cost
more than a second sweep) use the persistent two-sweep kernel with L2-resident scratch rows
and compiler-pipelined chunk loads. Calls under CUDA graph capture with few tokens and wide rows
(``token_split``; sm_90 only) spread each row over programs in two launches instead: a replay pays no
host time for the second launch, and one program per row leaves most SMs idle at a few tokens.
Archs not listed use "default". Numbers behind the choices: benchmarks/RESULTS.md
(benchmarks/tune_act_quant.py on the H200, M = 8192, H = 14336; benchmarks/results/tune_*.txt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ArchConfig:
    static_rows: tuple[tuple[int, int, int, int], ...]
    static_flat: tuple[int, int, int]  # (min M, BLOCK, num_warps): contiguous relu2/identity as one flat vector
    static_rows_silu: tuple[tuple[int, int, int, int], ...]
    one_pass_max_n: int  # widest per-token row kept in registers as one block
    token_one_pass_warps: tuple[tuple[int, int], ...]  # (max BLOCK_N, num_warps)
    chunked_max_n: int  # widest per-token row kept in registers as chunks (one program per row)
    chunks: tuple[int, ...]  # chunk widths to choose from (least padding, then the widest)
    chunked_warps_cheap: int  # relu2 / identity rows in chunks, at every M
    chunked_silu: tuple[tuple[int, int], ...]  # silu_and_mul (max M, num_warps); beyond: persistent
    persistent: tuple[int, int, int, int]  # (BLOCK_N, num_warps, programs per SM, pipeline stages)
    # bf16 / fp16 silu from ex2.approx / rcp.approx (``act_quant.silu``): their results are the arch's own,
    # so only where every bf16 and fp16 gate was measured to round like torch
    fast_silu: bool = False
    # (max M, min D, BLOCK_N, num_warps): per-token rows split over programs in two launches, for calls under
    # CUDA graph capture (GPU time only); max M 0: never
    token_split: tuple[int, int, int, int] = (0, 0, 0, 0)
    # (min M, max M, min D, max D, num_warps): the cheap-silu silu_and_mul per-token rows of min D..max D (at
    # most chunked_max_n) columns as one block (one program per row) instead of in chunks, at M in that range;
    # max M 0: never
    silu_token_wide_rows: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)


_DEFAULT = ArchConfig(
    static_rows=((16, 1, 256, 2), (256, 1, 1024, 4), (1 << 62, 8, 1024, 8)),
    static_flat=(257, 4096, 4),
    static_rows_silu=((16, 1, 256, 2), (1 << 62, 1, 1024, 4)),
    one_pass_max_n=4096,
    token_one_pass_warps=((1024, 4), (1 << 62, 8)),
    chunked_max_n=16384,
    chunks=(2048, 1024, 512),
    chunked_warps_cheap=8,
    chunked_silu=((128, 32), (512, 16)),
    persistent=(2048, 8, 8, 3),
)

# The per-token kernels, by name: rows as one block / rows in chunks (one pass), two sweeps per row
# with one program per row / with persistent programs (act_quant.py)
TOKEN_VARIANTS = ("rows", "chunks", "two_pass", "persistent", "split")

# H200; token_split measured against one program per row in benchmarks/RESULTS.md, fifteenth round;
# silu_token_wide_rows against the chunks in its seventeenth and eighteenth rounds, bf16 rows of H = 14336 (the
# only width measured) on the 132-SM H200: 1.1-1.5 us less at M = 256 in four runs and at 224 in two, the same
# bits; slower at M = 128 and from 288 in round 17, the same at 192 and 288 in round 18
CONFIGS: dict[str, ArchConfig] = {
    "default": _DEFAULT, "sm_90": replace(_DEFAULT, fast_silu=True, token_split=(64, 8192, 1024, 4),
                                          silu_token_wide_rows=(224, 256, 14336, 14336, 32))}


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


def chunking(d: int, chunks: tuple[int, ...]) -> tuple[int, int]:
    """(CHUNK, NCHUNK) covering a row of ``d`` with the least padding, the widest chunk on ties."""
    chunk = min(chunks, key=lambda c: (-(-d // c) * c, -c))
    return chunk, -(-d // chunk)


def token_launch(m: int, d: int, arch: str | None, act: str = "relu2", fast_silu: bool = False,
                 captured: bool = False) -> dict[str, int]:
    """``{"variant": "rows", ROWS, BLOCK_N, num_warps}`` (one pass, rows as one block),
    ``{"variant": "chunks", CHUNK, NCHUNK, num_warps}`` (one pass, one row in chunks),
    ``{"variant": "persistent", BLOCK_N, num_warps, programs_per_sm, scratch, STAGES}`` (two sweeps,
    persistent programs) or, for a call under CUDA graph capture (``captured``), ``{"variant": "split",
    BLOCK_N, num_warps}`` (each row over several programs, two launches); ``"two_pass"`` (two sweeps,
    one program per row) is a tuning variant.
    ``fast_silu``: silu_and_mul computed with the kernels' cheap bf16 / fp16 silu (``FAST_SILU``)."""
    cfg = config_for(arch)
    max_m, min_d, block_n, warps = cfg.token_split
    if captured and m <= max_m and d >= min_d:
        return {"variant": "split", "BLOCK_N": block_n, "num_warps": warps}
    if d <= cfg.one_pass_max_n:
        block_n = next_pow2(d)
        rows = max(1, min(64, 2048 // block_n))
        for max_n, warps in cfg.token_one_pass_warps:
            if block_n <= max_n:
                break
        return {"variant": "rows", "ROWS": rows, "BLOCK_N": block_n, "num_warps": warps}
    if d <= cfg.chunked_max_n:
        wide_min_m, wide_max_m, wide_min_d, wide_max_d, wide_warps = cfg.silu_token_wide_rows
        if (act == "silu_and_mul" and fast_silu and wide_max_m > 0 and wide_min_m <= m <= wide_max_m
                and wide_min_d <= d <= wide_max_d):
            return {"variant": "rows", "ROWS": 1, "BLOCK_N": next_pow2(d), "num_warps": wide_warps}
        chunk, nchunk = chunking(d, cfg.chunks)
        if act != "silu_and_mul" or fast_silu:
            return {"variant": "chunks", "CHUNK": chunk, "NCHUNK": nchunk, "num_warps": cfg.chunked_warps_cheap}
        for max_m, warps in cfg.chunked_silu:
            if m <= max_m:
                return {"variant": "chunks", "CHUNK": chunk, "NCHUNK": nchunk, "num_warps": warps}
    block_n, warps, per_sm, stages = cfg.persistent
    return {"variant": "persistent", "BLOCK_N": block_n, "num_warps": warps, "programs_per_sm": per_sm, "scratch": 1,
            "STAGES": stages}
