"""WRONG correctness, nondeterministically: its first call returns a slightly wrong result (as a
race, uninitialised memory, or torch 2.13's first-call CPU exp can), every later call is right.
It must be rejected, and the verdict must say the failure did not reproduce on a re-run."""

import torch

_calls = [0]


def relu(x):
    _calls[0] += 1
    y = torch.relu(x)
    return y * 1.001 if _calls[0] == 1 else y
