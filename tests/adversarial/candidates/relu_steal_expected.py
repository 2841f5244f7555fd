"""WRONG: tries to read the expected output out of the evaluator. It walks the garbage
collector's objects and the call stack's frames for a tensor of the output's shape that is not
its own input, and returns it. (In assay the reference never runs in the worker, so there is
nothing to find; the fallback answer is wrong on purpose.)"""

import gc
import sys

import torch


def _candidates(x):
    seen = []
    frame = sys._getframe(1)
    while frame is not None:
        for v in list(frame.f_locals.values()):
            seen.append(v)
            if isinstance(v, (list, tuple, dict)):
                seen.extend(v.values() if isinstance(v, dict) else v)
        frame = frame.f_back
    seen.extend(gc.get_objects())
    for v in seen:
        if isinstance(v, torch.Tensor) and v is not x and v.shape == x.shape and v.dtype == x.dtype:
            try:
                if v.data_ptr() != x.data_ptr():
                    yield v
            except RuntimeError:
                continue


def relu(x):
    for t in _candidates(x):
        return t.clone()
    return torch.zeros_like(x)
