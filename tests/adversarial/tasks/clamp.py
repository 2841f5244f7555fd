"""clamp(x, -1, 1) over ALL reals: inputs outside [-1, 1] are part of the contract."""

import torch

import assay


def clamp(x):
    return torch.clamp(x, -1.0, 1.0)


task = assay.Task(
    name="adv-clamp",
    reference=clamp,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 512)},
    inputs=[assay.Input("x", ("M", "N"), domain=assay.REAL)],
    workloads=[assay.Workload({"M": 64, "N": 256})],
    dtypes=["float32"],
)
