"""HOSTILE: closes file descriptors 3 and 4 (the worker's request/response pipes) inside the call."""

import os

import torch


def relu(x):
    for fd in (3, 4):
        try:
            os.close(fd)
        except OSError:
            pass
    return torch.relu(x)
