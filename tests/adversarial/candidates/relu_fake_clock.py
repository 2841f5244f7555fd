"""WRONG integrity: replaces time.perf_counter at import with a clock that runs at a tenth of
the real speed (every call would look 10x faster to a timer that uses it)."""

import time

import torch

_real = time.perf_counter
_t0 = _real()


def _slow_clock():
    return _t0 + (_real() - _t0) * 0.1


time.perf_counter = _slow_clock


def relu(x):
    return torch.relu(x)
