"""A small row softmax, sized for the Triton interpreter on CPU (used by bench/check_walltime.py)."""

import torch

import assay


def softmax(x):
    return torch.softmax(x, dim=-1)


task = assay.Task(
    name="softmax_small",
    reference=softmax,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 1024)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"),
                        special=("inf",))],
    workloads=[assay.Workload({"M": 32, "N": 1000})],
    dtypes=["float32"],
)
