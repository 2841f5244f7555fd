"""Row mean over the last dim, keepdim (template: row_mean)."""

import torch

import assay


def row_mean(x):
    return torch.mean(x, dim=-1, keepdim=True)


task = assay.Task(
    name="kb-row-mean",
    reference=row_mean,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
