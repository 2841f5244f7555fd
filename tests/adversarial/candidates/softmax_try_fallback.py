"""WRONG integrity (with a custom kernel required): a Triton kernel wrapped in try/except that
falls back to torch.softmax, the reference's own op. The launch always fails (a missing
argument), so the fallback is what runs, for every shape."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, s_r, s_c, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * s_r + cols * s_c, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    try:
        # "forgets" n_cols: the launch raises every time
        _softmax_kernel[(m,)](out, x, x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(n))
        return out
    except Exception:
        return torch.softmax(x, dim=-1)
