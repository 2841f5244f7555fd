"""Row log_softmax over rows longer than one 1024 block (template: log_softmax_looped)."""

import torch

import assay


def log_softmax(x):
    return torch.nn.functional.log_softmax(x, dim=-1)


task = assay.Task(
    name="kb-log-softmax-long",
    reference=log_softmax,
    dims={"M": assay.Dim(1, 6), "N": assay.Dim(1, 2600)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided"), special=("inf",))],
    workloads=[assay.Workload({"M": 4, "N": 2500})],
    dtypes=["float32"],
)
