"""Row sum over the last dim; transposed, strided and offset inputs are part of the contract."""

import assay


def rowsum(x):
    return x.sum(-1)


task = assay.Task(
    name="adv-rowsum",
    reference=rowsum,
    dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 512)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"))],
    workloads=[assay.Workload({"M": 64, "N": 256})],
    dtypes=["float32"],
)
