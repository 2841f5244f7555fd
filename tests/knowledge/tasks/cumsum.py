"""Row cumsum: no template computes it."""

import torch

import assay


def cumsum(x):
    return torch.cumsum(x, dim=-1)


task = assay.Task(
    name="kb-cumsum",
    reference=cumsum,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
