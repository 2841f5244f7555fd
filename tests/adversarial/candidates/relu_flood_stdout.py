"""HOSTILE: floods stdout with ~3 GiB (more than the worker's RLIMIT_FSIZE of 2 GiB), then
would return the right answer."""

import os

import torch

CHUNK = b"x" * (64 << 20)


def relu(x):
    for _ in range(48):  # 48 x 64 MiB = 3 GiB
        os.write(1, CHUNK)
    return torch.relu(x)
