"""y = 1e-7 * x: outputs far below the float32 absolute-tolerance floor (1e-6), calibrated tolerance."""

import assay


def tiny_scale(x):
    return x * 1e-7


task = assay.Task(
    name="adv-tiny-scale",
    reference=tiny_scale,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 256)},
    inputs=[assay.Input("x", ("M", "N"))],
    workloads=[assay.Workload({"M": 64, "N": 256})],
    dtypes=["float32"],
)
