"""relu(x @ w + b), w stored (K, N) (template: matmul_bias_relu)."""

import torch

import assay


def gemm_bias_relu(x, w, b):
    return torch.relu(x @ w + b)


task = assay.Task(
    name="kb-gemm-bias-relu",
    reference=gemm_bias_relu,
    dims={"M": assay.Dim(1, 48), "K": assay.Dim(1, 80), "N": assay.Dim(1, 48)},
    inputs=[assay.Input("x", ("M", "K"), layouts=("contiguous", "transposed", "offset")),
            assay.Input("w", ("K", "N"), layouts=("contiguous", "transposed", "strided")),
            assay.Input("b", ("N",), layouts=("contiguous", "strided"))],
    workloads=[assay.Workload({"M": 32, "K": 72, "N": 24})],
    dtypes=["float32"],
)
