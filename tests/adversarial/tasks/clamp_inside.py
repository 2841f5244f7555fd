"""clamp(x, -1, 1) where the contract only admits inputs in [-1, 1]: the identity is correct here."""

import torch

import assay


def clamp(x):
    return torch.clamp(x, -1.0, 1.0)


task = assay.Task(
    name="adv-clamp-inside",
    reference=clamp,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 512)},
    inputs=[assay.Input("x", ("M", "N"), domain=assay.Domain(-1.0, 1.0))],
    workloads=[assay.Workload({"M": 64, "N": 256})],
    dtypes=["float32"],
)
