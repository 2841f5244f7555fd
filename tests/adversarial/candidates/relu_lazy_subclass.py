"""WRONG integrity: returns a lazy tensor subclass. The call only wraps its input; the relu
runs the first time anything touches the result (so a timer around the call sees nothing)."""

import torch


class LazyRelu(torch.Tensor):
    @staticmethod
    def __new__(cls, src):
        t = torch.Tensor._make_subclass(cls, torch.empty(src.shape, dtype=src.dtype, device=src.device))
        t._src = src
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            for a in args:
                if isinstance(a, LazyRelu) and getattr(a, "_src", None) is not None:
                    src, a._src = a._src, None
                    a.copy_(torch.relu(src))
            return func(*args, **(kwargs or {}))


def relu(x):
    return LazyRelu(x)
