"""WRONG metadata: returns a 1-tuple `(out,)` where the reference returns a tensor."""

import torch


def relu(x):
    return (torch.relu(x),)
