"""WRONG: returns zeros. Every true output of a 4096-wide softmax is about 2.4e-4."""

import torch


def softmax(x):
    return torch.zeros_like(x, memory_format=torch.contiguous_format)
