"""WRONG: re-views the input as if it were contiguous (as_strided with row-major strides)."""

import torch


def rowsum(x):
    m, n = x.shape
    flat = x.as_strided((m, n), (n, 1))  # BUG: assumes the memory is row-major and dense
    return flat.sum(-1)
