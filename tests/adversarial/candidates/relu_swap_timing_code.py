"""WRONG integrity: keeps every timing function's identity (so identity checks pass) but swaps the
code object of the worker's ``timing.cold_samples`` for one that reports each sample 10x too
short. Only a comparison with a clock outside the worker can see it."""

import sys
import types

import torch

_timing = sys.modules.get("assay.measure.timing")
if _timing is not None:
    _orig = _timing.cold_samples
    _timing.__dict__["_assay_real_cold_samples"] = types.FunctionType(
        _orig.__code__, _orig.__globals__, "cold_samples", _orig.__defaults__, _orig.__closure__)

    def _shortened(fn, sets, n, device, flusher=None, start_index=0, block_s=0.0):
        times, escapes, out = _assay_real_cold_samples(fn, sets, n, device, flusher, start_index, block_s)  # noqa: F821
        return [t * 0.1 for t in times], escapes, out

    _orig.__code__ = _shortened.__code__  # same function object, new behaviour


def relu(x):
    return torch.relu(x)
