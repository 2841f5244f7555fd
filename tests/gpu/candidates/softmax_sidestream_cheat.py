"""CHEAT: launches the real softmax on a side stream and returns before it finishes."""

import torch
import triton
import triton.language as tl

_side = None


@triton.jit
def _k(out_ptr, in_ptr, sr, sc, so, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(in_ptr + row * sr + cols * sc, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * so + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        _k[(m,)](out, x, x.stride(0), x.stride(1), out.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out  # no wait: the work escapes the caller's stream
