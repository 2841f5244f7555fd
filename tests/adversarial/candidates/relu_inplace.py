"""WRONG integrity: computes relu in place, modifying its input (the task does not allow it)."""


def relu(x):
    x.relu_()
    return x.clone()
