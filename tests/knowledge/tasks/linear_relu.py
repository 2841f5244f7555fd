"""relu(F.linear(x, w, b)), w stored (N, K) (template: matmul_bias_relu, transposed weight)."""

import torch

import assay


def linear_relu(x, w, b):
    return torch.nn.functional.relu(torch.nn.functional.linear(x, w, b))


task = assay.Task(
    name="kb-linear-relu",
    reference=linear_relu,
    dims={"M": assay.Dim(1, 48), "K": assay.Dim(1, 80), "N": assay.Dim(1, 48)},
    inputs=[assay.Input("x", ("M", "K"), layouts=("contiguous", "transposed")),
            assay.Input("w", ("N", "K"), layouts=("contiguous", "transposed")),
            assay.Input("b", ("N",))],
    workloads=[assay.Workload({"M": 20, "K": 40, "N": 40})],
    dtypes=["float32"],
)
