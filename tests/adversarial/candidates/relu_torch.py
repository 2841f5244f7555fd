"""CORRECT: plain torch relu (used to show the evaluator carries on after a bad candidate)."""

import torch


def relu(x):
    return torch.relu(x)
