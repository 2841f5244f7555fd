"""WRONG: a Triton row sum that assumes a contiguous row-major input (row stride N, column stride 1).

Right on contiguous and offset inputs; reads the wrong memory for transposed and strided ones.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)  # BUG: ignores strides
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def rowsum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m,), dtype=x.dtype, device=x.device)
    _rowsum[(m,)](out, x, n, BLOCK=triton.next_power_of_2(n))
    return out
