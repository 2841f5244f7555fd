"""WRONG integrity: computes correctly for the first N calls (more than the correctness gauntlet
and the integrity trace make), then returns its last output for every later call: a result
replayed inside the timing loop."""

import torch

N = 400
_state = {"calls": 0, "last": None}


def relu(x):
    _state["calls"] += 1
    if _state["calls"] <= N or _state["last"] is None or _state["last"].shape != x.shape:
        _state["last"] = torch.relu(x)
    return _state["last"].clone()
