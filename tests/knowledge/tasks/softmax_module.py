"""Row softmax as a parameter-free nn.Module (KernelBench style): the candidate defines ModelNew."""

import torch

import assay


class Model(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.softmax(x, dim=self.dim)


task = assay.Task(
    name="kb-softmax-module",
    reference=Model,
    init_inputs=lambda dims: (-1,),
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
