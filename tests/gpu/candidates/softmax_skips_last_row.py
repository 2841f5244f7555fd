"""WRONG (unwritten output): the Triton softmax launched on one program too few, so the output's
last row is never written. On cuda the evaluator poisons the allocator first: the row reads NaN
(not stale, possibly plausible data), and the verdict says where."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_stride_r, in_stride_c, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride_r + cols * in_stride_c, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m > 1:
        _softmax_kernel[(m - 1,)](out, x, x.stride(0), x.stride(1), out.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out
