"""WRONG constant: GELU without the 0.5 factor (x * (1 + erf(x / sqrt 2)))."""

import math

import torch


def gelu(x):
    return x * (1.0 + torch.erf(x / math.sqrt(2.0)))
