"""gelu(x) * y (template: gelu_mul)."""

import torch

import assay


def gelu_mul(x, y):
    return torch.nn.functional.gelu(x) * y


task = assay.Task(
    name="kb-gelu-mul",
    reference=gelu_mul,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "offset")),
            assay.Input("y", ("M", "N"), layouts=("contiguous", "strided", "expanded"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
