import assay
from assay.verify.cases import Budget, Case, boundary_values, plan_cases
from assay.verify.inputs import apply_layout, make_inputs

import torch

TASK = assay.Task(
    name="t", reference=lambda x: x * 2, dims={"M": assay.Dim(1, 512), "N": assay.Dim(1, 4096)},
    inputs=[assay.Input("x", ("M", "N"), layouts=("contiguous", "transposed", "strided", "offset"),
                        special=("nan", "inf"))],
    workloads=[assay.Workload({"M": 64, "N": 1000})],
)


def test_boundary_values_cover_small_primes_and_block_edges():
    vals = boundary_values(1, 4096)
    for v in (1, 2, 3, 7, 17, 31, 127, 129, 1023, 1025, 4095):
        assert v in vals
    assert all(1 <= v <= 4096 for v in vals)


def test_plan_covers_every_kind_and_is_seeded_by_the_secret():
    plan = plan_cases(TASK, "cpu", b"secret-1", Budget(1 << 18, 1 << 12))
    kinds = {c.kind for c in plan.cases}
    assert {"workload", "boundary", "layout", "values", "special", "largest", "random"} <= kinds
    layouts = {c.layouts[0] for c in plan.cases}
    assert {"transposed", "strided", "offset"} <= layouts
    other = plan_cases(TASK, "cpu", b"secret-2", Budget(1 << 18, 1 << 12))
    assert [c.key() for c in plan.cases] == [c.key() for c in other.cases]
    assert [c.seed for c in plan.cases] != [c.seed for c in other.cases]


def test_token_round_trip():
    c = Case("boundary", {"M": 3, "N": 17}, "float32", "normal", ("strided",), seed=1234)
    back = Case.from_token(c.token())
    assert back.key() == c.key() and back.seed == 1234


def test_layouts_keep_values_and_change_memory():
    x = torch.randn(5, 7)
    t = apply_layout(x, "transposed")
    assert torch.equal(t, x) and t.stride() == (1, 5)
    s = apply_layout(x, "strided")
    assert torch.equal(s, x) and s.stride() == (14, 2)
    o = apply_layout(x, "offset")
    assert torch.equal(o, x) and o.storage_offset() == 1


def test_domain_is_respected():
    task = assay.Task(name="log", reference=torch.log, dims={"N": assay.Dim(1, 100)},
                      inputs=[assay.Input("x", ("N",), domain=assay.Domain(0.5, 2.0))])
    for cls in ("normal", "uniform", "large", "repeated", "constant_rows", "zeros"):
        (x,) = make_inputs(task, Case("values", {"N": 100}, "float32", cls, ("contiguous",), seed=7))
        assert float(x.min()) >= 0.5 and float(x.max()) <= 2.0, cls
