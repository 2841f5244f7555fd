import torch

import assay


def relu(x):
    return torch.relu(x)


task = assay.Task(
    name="relu",
    reference=relu,
    dims={"M": assay.Dim(1, 8192), "N": assay.Dim(1, 8192)},
    inputs=[assay.Input("x", ("M", "N"))],
    workloads=[assay.Workload({"M": 4096, "N": 4096})],
    dtypes=["float32", "bfloat16"],
)
