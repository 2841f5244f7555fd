"""In-place relu: the contract says the input IS modified (mutates_inputs=True), so writing
into the input and returning it is legitimate here."""

import torch

import assay


def relu_(x):
    return torch.relu_(x)


task = assay.Task(
    name="adv-relu-inplace",
    reference=relu_,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 128)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed"))],
    workloads=[assay.Workload({"M": 16, "N": 64})],
    dtypes=["float32"],
    mutates_inputs=True,
)
