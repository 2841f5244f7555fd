"""WRONG: the tail mask loads 0.0 instead of -inf, so padded lanes join the max and the sum.

Correct whenever N is a power of two (BLOCK == N: no padded lanes); wrong at every other N.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_stride_r, in_stride_c, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride_r + cols * in_stride_c, mask=mask, other=0.0)  # BUG: not -inf
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, num / den, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(n)
    _softmax_kernel[(m,)](out, x, x.stride(0), x.stride(1), out.stride(0), n, BLOCK=block)
    return out
