"""Row softmax, small CPU shapes. Production shapes: N=1000 (not a power of two) and N=2048."""

import torch

import assay


def softmax(x):
    return torch.softmax(x, dim=-1)


task = assay.Task(
    name="adv-softmax",
    reference=softmax,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 2048)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"))],
    workloads=[assay.Workload({"M": 8, "N": 1000}, weight=2.0), assay.Workload({"M": 4, "N": 2048})],
    dtypes=["float32"],
)
