"""CORRECT look-alikes of the wrong candidates: each must be accepted (no false rejections)."""

from __future__ import annotations

from pathlib import Path

from assay.evaluate import check
from assay.verdict import Category, Status, Verdict

HERE = Path(__file__).parent
CANDIDATES = HERE / "candidates"
TASKS = HERE / "tasks"
BUDGET = 6.0


def run(candidate: str, task: str, **kw: object) -> Verdict:
    # these tests are about the correctness gauntlet: primitives allowed, no timing stage
    kw.setdefault("require_custom_kernel", False)
    kw.setdefault("timing", False)
    kw.setdefault("time_budget", BUDGET)
    return check(CANDIDATES / f"{candidate}.py", TASKS / f"{task}.py", device="cpu", **kw)


def assert_accepted(v: Verdict) -> None:
    assert v.accepted, f"correct candidate REJECTED: {[(r.category.value, r.message) for r in v.reasons]}"
    assert v.reasons == []
    corr = v.stage("correctness")
    assert corr is not None and corr.status is Status.passed
    assert corr.evidence["passed"] >= 12 and corr.evidence["failed"] == 0


def test_online_softmax_different_summation_order():
    v = run("softmax_online", "softmax")
    assert_accepted(v)
    assert v.candidate["language"] == "triton" and v.candidate["label"] == "custom kernel"
    assert "layout" in v.stage("correctness").evidence["kinds"]  # strides honoured


def test_specialisation_with_correct_fallback():
    v = run("softmax_specialized_ok", "softmax")
    assert_accepted(v)
    kinds = v.stage("correctness").evidence["kinds"]
    assert "workload" in kinds and "layout" in kinds  # the N=1000 fast path and the fallback both ran


def test_cpp_rowsum_double_accumulation():
    v = run("rowsum_cpp", "rowsum")
    assert_accepted(v)
    assert v.candidate["language"] == "cpp" and v.candidate["label"] == "custom kernel"
    assert v.stage("build").status is Status.passed


def test_plain_torch_is_accepted_as_existing_primitive():
    v = run("softmax_torch", "softmax")
    assert_accepted(v)
    assert v.candidate["language"] == "torch"
    assert v.candidate["label"] == "existing primitive"


def test_plain_torch_rejected_when_a_custom_kernel_is_required():
    v = run("softmax_torch", "softmax", require_custom_kernel=True)
    assert not v.accepted
    assert v.categories == {Category.integrity}


def test_correct_candidate_on_loose_tolerance_task():
    # the task whose loose atol lets zeros/constants through element-wise still accepts the real thing
    assert_accepted(run("softmax_torch", "softmax_wide"))


def test_identity_is_a_correct_clamp_when_the_domain_is_inside_the_range():
    # the same identity that is rejected for clamp over all reals is right for inputs in [-1, 1]
    assert_accepted(run("clamp_identity", "clamp_inside"))
