"""x * sigmoid(x) (template: swish)."""

import torch

import assay


def swish(x):
    return x * torch.sigmoid(x)


task = assay.Task(
    name="kb-swish",
    reference=swish,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
