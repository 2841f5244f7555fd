"""WRONG: returns zeros; the true outputs (1e-7 * x) sit below the float32 absolute floor."""

import torch


def tiny_scale(x):
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
