"""A stand-in coding agent for `assay optimize --generator agent:...`: writes a Triton kernel."""

from pathlib import Path

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0, mask=m)


def scale(x):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y
'''
assert "scale" in Path("reference.py").read_text()
Path("candidate.py").write_text(KERNEL)
