"""WRONG: returns the row mean of the true output (1/N) everywhere: right on average, wrong everywhere."""

import torch


def softmax(x):
    return torch.full(x.shape, 1.0 / x.shape[-1], dtype=x.dtype, device=x.device)
