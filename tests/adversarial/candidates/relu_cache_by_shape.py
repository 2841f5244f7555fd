"""WRONG: remembers the output of the first call for each shape and returns it for every later
call of that shape (right on the first call, stale on the next inputs)."""

import torch

_seen = {}


def relu(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _seen:
        _seen[key] = torch.relu(x)
    return _seen[key].clone()
