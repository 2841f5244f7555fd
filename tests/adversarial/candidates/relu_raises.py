"""WRONG robustness: raises on every call."""


def relu(x):
    raise ValueError("this kernel does not support the given input")
