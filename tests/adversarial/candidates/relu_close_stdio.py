"""HOSTILE (harmless to the verdict): closes the worker's stdout and stderr inside the call, then
computes the right answer."""

import os

import torch


def relu(x):
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    return torch.relu(x)
