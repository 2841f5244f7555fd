"""Row sum over the last dim (template: row_sum)."""

import torch

import assay


def row_sum(x):
    return x.sum(dim=-1)


task = assay.Task(
    name="kb-row-sum",
    reference=row_sum,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
