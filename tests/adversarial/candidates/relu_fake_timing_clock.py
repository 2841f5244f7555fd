"""WRONG integrity: reaches into the worker's timing module (already imported when the candidate
is) and swaps its clock for one that runs at a tenth of the real speed: every sample the worker
reports is 10x too short, so the speedup over the baseline is inflated about 10x."""

import sys

import torch

_timing = sys.modules.get("assay.measure.timing")
if _timing is not None:
    _real = _timing._perf_counter
    _t0 = _real()
    _timing._perf_counter = lambda: _t0 + (_real() - _t0) * 0.1


def relu(x):
    return torch.relu(x)
