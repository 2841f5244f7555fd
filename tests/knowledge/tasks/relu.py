"""relu(x), NaN defined (template: relu)."""

import torch

import assay


def relu(x):
    return torch.relu(x)


task = assay.Task(
    name="kb-relu",
    reference=relu,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"),
                        special=("nan", "inf"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
