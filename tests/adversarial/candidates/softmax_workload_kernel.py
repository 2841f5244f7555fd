"""CORRECT look-alike: a Triton kernel for the production shapes (contiguous rows of N=1000 or
N=2048), torch.softmax for everything else. Every workload takes the kernel path."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(out_ptr, in_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(in_ptr + row * N + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * N + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    if n in (1000, 2048) and x.is_contiguous():
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        _softmax_rows[(m,)](out, x, N=n, BLOCK=triton.next_power_of_2(n))
        return out
    return torch.softmax(x, dim=-1)
