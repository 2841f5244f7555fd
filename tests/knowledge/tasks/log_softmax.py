"""Row log_softmax, small CPU shapes (template: log_softmax)."""

import torch

import assay


def log_softmax(x):
    return torch.log_softmax(x, dim=-1)


task = assay.Task(
    name="kb-log-softmax",
    reference=log_softmax,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"),
                        special=("inf",))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
