"""WRONG for a clamp over all reals: the identity (right only on inputs already inside [-1, 1])."""


def clamp(x):
    return x.clone()
