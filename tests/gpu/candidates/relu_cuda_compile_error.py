from torch.utils.cpp_extension import load_inline

_cuda = r"""
#include <torch/extension.h>
__global__ void k(float* y) { y[threadIdx.x] = undefined_symbol_here; }
torch::Tensor relu_fwd(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }
"""
_mod = load_inline("assay_relu_bad", cpp_sources="torch::Tensor relu_fwd(torch::Tensor x);",
                   cuda_sources=_cuda, functions=["relu_fwd"])


def relu(x):
    return _mod.relu_fwd(x)
