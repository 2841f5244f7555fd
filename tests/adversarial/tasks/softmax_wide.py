"""Softmax over a fixed, wide row (N=4096): every output is tiny (about 1/4096).

The task's absolute tolerance is loose (5e-2), so on normally distributed rows an all-zeros or a
constant output passes the element-wise test; only the relative-norm check rejects it there.
"""

import torch

import assay


def softmax(x):
    return torch.softmax(x, dim=-1)


task = assay.Task(
    name="adv-softmax-wide",
    reference=softmax,
    dims={"M": assay.Dim(1, 4), "N": assay.Dim(4096, 4096)},
    inputs=[assay.Input("x", ("M", "N"))],
    workloads=[assay.Workload({"M": 4, "N": 4096})],
    dtypes=["float32"],
    tolerance={"float32": (5e-2, 1e-2)},
)
