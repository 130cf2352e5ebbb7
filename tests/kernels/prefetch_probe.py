"""Triton kernels for tests (``tests/kernels/test_small_m_gemm.py``): the small-M GEMM's L2 prefetch addresses
(the interpreter has no ``prefetch.global.L2``) and the rows of x its token lanes read, read back."""

import triton
import triton.language as tl

from fused_quant.kernels.triton import small_m_gemm as kernels


@triton.jit
def probe(w_ptr, out_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, LINES: tl.constexpr):
    """For program (N block, K split): the weight at each address the small-M kernel would prefetch, into
    ``out[(split * N blocks + N block) * BLOCK_N + row, line]``."""
    pid_n, pid_s = tl.program_id(0), tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_first, k_last = kernels._split_k_blocks(K, BLOCK_K, pid_s, tl.num_programs(1))
    ptrs = kernels._prefetch_addresses(w_ptr, tl.where(rn < N, rn, 0), stride_wn, k_first * BLOCK_K,
                                       tl.minimum(k_last * BLOCK_K, K), LINES)
    slot = (pid_s * tl.num_programs(0) + pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(out_ptr + slot[:, None] * LINES + tl.arange(0, LINES)[None, :], tl.load(ptrs))


@triton.jit
def token_rows_probe(x_ptr, out_ptr, M, BLOCK_M: tl.constexpr):
    """For token block ``pid``: the value of x (one float per row) at the row each of its lanes reads, into
    ``out[pid * BLOCK_M + lane]``."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(out_ptr + rm, tl.load(x_ptr + kernels._token_rows(rm, M)))
