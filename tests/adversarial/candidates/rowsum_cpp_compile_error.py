"""WRONG build: a C++ candidate (cpp_sources only) with a compile error (undeclared identifier)."""

import torch
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor rowsum(torch::Tensor x) {
    return x.sum(-1) + undeclared_bias_term;
}
"""

_ext = load_inline(name="adv_rowsum_broken", cpp_sources=[_SRC], functions=["rowsum"], verbose=False)


def rowsum(x: torch.Tensor) -> torch.Tensor:
    return _ext.rowsum(x)
