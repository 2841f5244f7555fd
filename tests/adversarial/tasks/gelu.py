"""Exact (erf) GELU."""

import torch

import assay


def gelu(x):
    return torch.nn.functional.gelu(x)


task = assay.Task(
    name="adv-gelu",
    reference=gelu,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 512)},
    inputs=[assay.Input("x", ("M", "N"))],
    workloads=[assay.Workload({"M": 64, "N": 256})],
    dtypes=["float32"],
)
