"""Row max over the last dim, NaN and inf defined (template: row_max)."""

import torch

import assay


def row_max(x):
    return x.amax(dim=-1)


task = assay.Task(
    name="kb-row-max",
    reference=row_max,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided"), special=("nan", "inf"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
