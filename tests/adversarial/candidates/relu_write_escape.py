"""HOSTILE: tries to create files outside its own directory (paths filled in by the test:
__TARGETS__). Answers relu(x) when every write failed, relu(x) + 1 when one succeeded."""

import os

import torch

TARGETS = __TARGETS__


def escaped():
    for path in TARGETS:
        try:
            with open(path, "w") as f:
                f.write("escaped")
            return True
        except OSError:
            pass
    return False


def relu(x):
    return torch.relu(x) + (1.0 if escaped() else 0.0)
