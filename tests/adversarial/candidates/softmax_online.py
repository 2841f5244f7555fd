"""CORRECT look-alike: a two-pass "online" softmax over fixed 64-wide tiles.

Pass 1 keeps a running max and a running (rescaled) sum, so the summation order differs from
torch's; pass 2 writes exp(x - max) / sum. Strides are honoured.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _online_softmax(out_ptr, in_ptr, s_r, s_c, o_r, o_c, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    src = in_ptr + row * s_r
    dst = out_ptr + row * o_r
    cols = tl.arange(0, BLOCK)
    x = tl.load(src + cols * s_c, mask=cols < n, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    l = tl.sum(tl.exp(x - m), axis=0)
    for start in range(BLOCK, n, BLOCK):
        c = start + cols
        x = tl.load(src + c * s_c, mask=c < n, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(src + c * s_c, mask=c < n, other=-float("inf")).to(tl.float32)
        tl.store(dst + c * o_c, tl.exp(x - m) / l, mask=c < n)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _online_softmax[(m,)](out, x, x.stride(0), x.stride(1), out.stride(0), out.stride(1), n, BLOCK=64)
    return out
