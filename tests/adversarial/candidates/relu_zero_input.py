"""WRONG integrity: computes the right output, then zeroes its input (the contract forbids
touching inputs)."""

import torch


def relu(x):
    out = torch.relu(x)
    x.zero_()
    return out
