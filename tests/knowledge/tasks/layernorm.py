"""LayerNorm over the last dim with weight and bias (template: layernorm)."""

import torch

import assay


def layernorm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


task = assay.Task(
    name="kb-layernorm",
    reference=layernorm,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset")),
            assay.Input("weight", ("N",), layouts=("contiguous", "strided")),
            assay.Input("bias", ("N",), layouts=("contiguous", "offset"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32"],
)
