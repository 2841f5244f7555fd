"""WRONG constant: a Triton leaky_relu with slope 0.1 instead of 0.01."""

import torch
import triton
import triton.language as tl


@triton.jit
def _leaky(out_ptr, in_ptr, s_r, s_c, o_r, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * s_r + cols * s_c, mask=mask, other=0.0)
    tl.store(out_ptr + row * o_r + cols, tl.where(x > 0, x, 0.1 * x), mask=mask)  # BUG: 0.1


def leaky_relu(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _leaky[(m,)](out, x, x.stride(0), x.stride(1), out.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out
