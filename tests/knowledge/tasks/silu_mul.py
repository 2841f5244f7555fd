"""silu(x) * y, the SwiGLU gate, in float32 and float16 (template: silu_mul).

The domain is bounded so that no product leaves the float16 range: the comparison checks
+/-inf against the *unrounded* fp64 reference, so an output that overflows float16 exactly as
torch's own float16 reference does (e.g. silu(1541) * -2178 -> -inf) is counted as an inf
mismatch.
"""

import torch

import assay


def silu_mul(x, y):
    return torch.nn.functional.silu(x) * y


task = assay.Task(
    name="kb-silu-mul",
    reference=silu_mul,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 300)},
    inputs=[assay.Input("x", ("M", "N"), domain=assay.Domain(-100.0, 100.0), layouts=("contiguous", "transposed")),
            assay.Input("y", ("M", "N"), domain=assay.Domain(-100.0, 100.0),
                        layouts=("contiguous", "transposed", "strided"))],
    workloads=[assay.Workload({"M": 16, "N": 200})],
    dtypes=["float32", "float16"],
)
