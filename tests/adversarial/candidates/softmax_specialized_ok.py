"""CORRECT look-alike: a fast path for the N=1000 contiguous workload, a general fallback elsewhere.

The fast path hard-codes N=1000 and the row stride (constexpr), and is only taken when both hold.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_n1000(out_ptr, in_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(in_ptr + row * N + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * N + cols, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def _softmax_general(out_ptr, in_ptr, s_r, s_c, o_r, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * s_r + cols * s_c, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * o_r + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if n == 1000 and x.is_contiguous():
        _softmax_n1000[(m,)](out, x, N=1000, BLOCK=1024)
    else:
        block = triton.next_power_of_2(n)
        _softmax_general[(m,)](out, x, x.stride(0), x.stride(1), out.stride(0), n, BLOCK=block)
    return out
