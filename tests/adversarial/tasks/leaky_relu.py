"""leaky_relu with the default negative slope 0.01."""

import torch

import assay


def leaky_relu(x):
    return torch.nn.functional.leaky_relu(x, negative_slope=0.01)


task = assay.Task(
    name="adv-leaky-relu",
    reference=leaky_relu,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 512)},
    inputs=[assay.Input("x", ("M", "N"))],
    workloads=[assay.Workload({"M": 64, "N": 256})],
    dtypes=["float32"],
)
