"""WRONG integrity: returns an uninitialised tensor at once and fills it from a background
thread 20 ms later (the CPU analogue of work left running on a side stream: a timer around
the call sees almost nothing)."""

import threading
import time

import torch


def relu(x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def fill():
        time.sleep(0.02)
        out.copy_(torch.relu(x))

    threading.Thread(target=fill, daemon=True).start()
    return out
