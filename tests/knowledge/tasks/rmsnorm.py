"""RMSNorm over the last dim with a weight (template: rmsnorm)."""

import torch

import assay


def rmsnorm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


task = assay.Task(
    name="kb-rmsnorm",
    reference=rmsnorm,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset")),
            assay.Input("weight", ("N",), layouts=("contiguous", "strided"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
