"""relu over a non-negative domain: the identity is value-correct, so only the alias gate can
tell a candidate that returns its input from one that computes a fresh output."""

import math

import torch

import assay


def relu(x):
    return torch.relu(x)


task = assay.Task(
    name="adv-relu-positive",
    reference=relu,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 128)},
    inputs=[assay.Input("x", ("M", "N"), domain=assay.Domain(0.0, math.inf),
                        layouts=("contiguous", "transposed"))],
    workloads=[assay.Workload({"M": 16, "N": 64})],
    dtypes=["float32"],
    mutates_inputs=False,
)
