"""Elementwise relu; inputs must not be modified (mutates_inputs=False)."""

import torch

import assay


def relu(x):
    return torch.relu(x)


task = assay.Task(
    name="adv-relu",
    reference=relu,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 256)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided"))],
    workloads=[assay.Workload({"M": 32, "N": 128})],
    dtypes=["float32"],
    mutates_inputs=False,
)
