"""WRONG robustness: allocates an enormous tensor (2**40 float32 elements: 4 TiB)."""

import torch


def relu(x):
    scratch = torch.empty(1 << 40)
    scratch[:1] = 0
    return torch.relu(x)
