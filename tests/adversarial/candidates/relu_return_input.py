"""WRONG integrity on a non-negative domain: relu is the identity there, so returning the input
itself is value-correct, but the "output" is the caller's own tensor (aliasing)."""


def relu(x):
    return x
