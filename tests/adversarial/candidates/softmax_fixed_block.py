"""WRONG: specialised for the N=1000 workload (one 1024-wide block per row), no fallback.

Masked loads keep it memory-safe, but every column past 1024 is never read or written, so it
is wrong for every N > 1024 (the task admits N up to 2048).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_1000(out_ptr, in_ptr, s_r, s_c, o_r, n_cols, BLOCK: tl.constexpr):
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
    _softmax_1000[(m,)](out, x, x.stride(0), x.stride(1), out.stride(0), n, BLOCK=1024)  # tuned for N=1000
    return out
