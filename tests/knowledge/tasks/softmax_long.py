"""Row softmax over rows longer than one 1024 block (template: softmax_looped)."""

import torch

import assay


def softmax(x):
    return torch.nn.functional.softmax(x, dim=1)


task = assay.Task(
    name="kb-softmax-long",
    reference=softmax,
    dims={"M": assay.Dim(1, 6), "N": assay.Dim(1, 2600)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided"), special=("inf",))],
    workloads=[assay.Workload({"M": 4, "N": 2500})],
    dtypes=["float32"],
)
