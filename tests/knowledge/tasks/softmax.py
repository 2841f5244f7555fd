"""Row softmax, small CPU shapes (template: softmax)."""

import torch

import assay


def softmax(x):
    return torch.softmax(x, dim=-1)


task = assay.Task(
    name="kb-softmax",
    reference=softmax,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"),
                        special=("inf",))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
