"""y = 1e-7 * x for x in [-1, 1]: every output is below the float32 absolute-tolerance floor
(1e-6), for every value class, so element-wise checks pass a zero output; only the relative
norm check sees that all the signal is missing."""

import assay


def tiny_scale(x):
    return x * 1e-7


task = assay.Task(
    name="adv-tiny-scale-unit",
    reference=tiny_scale,
    dims={"M": assay.Dim(1, 32), "N": assay.Dim(1, 128)},
    inputs=[assay.Input("x", ("M", "N"), domain=assay.Domain(-1.0, 1.0))],
    workloads=[assay.Workload({"M": 32, "N": 128})],
    dtypes=["float32"],
)
