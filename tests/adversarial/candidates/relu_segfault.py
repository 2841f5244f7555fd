"""WRONG robustness: dereferences a NULL pointer inside the call (SIGSEGV)."""

import ctypes


def relu(x):
    ctypes.string_at(0)
    return x.clamp_min(0)
