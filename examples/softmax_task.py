"""Row softmax over the last dim: a native assay task (see docs/task-format.md)."""

import torch

import assay


def softmax(x):
    return torch.softmax(x, dim=-1)


task = assay.Task(
    name="softmax",
    reference=softmax,
    dims={"M": assay.Dim(1, 4096), "N": assay.Dim(1, 8192)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"),
                        special=("inf",))],
    workloads=[assay.Workload({"M": 256, "N": 1000}, weight=2.0), assay.Workload({"M": 64, "N": 4096})],
    dtypes=["float32"],
)
