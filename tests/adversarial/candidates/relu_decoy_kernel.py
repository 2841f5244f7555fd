"""WRONG integrity (with a custom kernel required): a Triton kernel is defined (a decoy, never
launched); the relu is composed from torch operations (gt, mul).

(It was a softmax composed from amax/sub/exp/sum/div until torch 2.13's CPU exp was seen, about
once in a hundred fresh processes under load, to return a first-call result 1.8e-4 off in
relative terms: the gauntlet then rightly rejected it as incorrect before the integrity gate
spoke. Exact arithmetic keeps this test about the gate.)"""

import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def relu(x: torch.Tensor) -> torch.Tensor:
    return x * (x > 0)
