import torch
from torch.utils.cpp_extension import load_inline

_cuda = r"""
#include <torch/extension.h>
__global__ void bad(float* y) { float* p = (float*)0x10; p[threadIdx.x] = 1.f; y[0] = 0.f; }
torch::Tensor relu_fwd(torch::Tensor x) { auto y = torch::empty_like(x); bad<<<1, 32>>>(y.data_ptr<float>()); return y; }
"""
_mod = load_inline("assay_relu_illegal", cpp_sources="torch::Tensor relu_fwd(torch::Tensor x);",
                   cuda_sources=_cuda, functions=["relu_fwd"])


def relu(x):
    return _mod.relu_fwd(x)
