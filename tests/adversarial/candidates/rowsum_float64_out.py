"""WRONG metadata: returns float64 for a float32 task (the values are, if anything, better)."""

import torch


def rowsum(x):
    return x.to(torch.float64).sum(-1)
