"""Adversarial WRONG candidates: each must be rejected, for the right reason (its category).

Candidates live in ``candidates/``, small native tasks in ``tasks/``. Everything runs on the CPU
(Triton under TRITON_INTERPRET=1), with small shapes and a short time budget.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.errors import CandidateError, UserError
from assay.evaluate import check
from assay.verdict import Category, Finding, Status, Verdict

HERE = Path(__file__).parent
CANDIDATES = HERE / "candidates"
TASKS = HERE / "tasks"
BUDGET = 6.0  # seconds of correctness cases per evaluation


def run(candidate: str, task: str, **kw: object) -> Verdict:
    # these tests are about the correctness gauntlet: primitives allowed, no timing stage
    kw.setdefault("require_custom_kernel", False)
    kw.setdefault("timing", False)
    kw.setdefault("time_budget", BUDGET)
    return check(CANDIDATES / f"{candidate}.py", TASKS / f"{task}.py", device="cpu", **kw)


def assert_rejected(v: Verdict, category: Category) -> None:
    """Rejected, and every rejecting reason is of ``category``."""
    assert not v.accepted, f"wrong candidate ACCEPTED: {v.candidate['path']}"
    assert v.reasons, "rejected without a reason"
    assert v.categories == {category}, [(r.category.value, r.message) for r in v.reasons]


def minimal_case(v: Verdict) -> Finding:
    """The correctness stage's rejecting finding: the minimal failing case."""
    stage = v.stage("correctness")
    assert stage is not None and stage.status is Status.failed
    rejecting = [f for f in stage.findings if f.rejects]
    assert len(rejecting) == 1
    f = rejecting[0]
    for key in ("dims", "values", "where", "seed", "case", "layouts"):
        assert key in f.evidence, key
    return f


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# 1. tail mask loads 0.0 instead of -inf --------------------------------------------------------------
def test_softmax_tail_mask_other_zero_caught_off_powers_of_two():
    v = run("softmax_tail_zero", "softmax")
    assert_rejected(v, Category.correctness)
    f = minimal_case(v)
    n = f.evidence["dims"]["N"]
    assert not is_pow2(n), f"minimal failing N={n} should not be a power of two"
    assert f.evidence["where"]
    assert f.evidence["case"].endswith(f"seed={f.evidence['seed']}")
    # the failing case replays (same verdict) ...
    again = run("softmax_tail_zero", "softmax", replay=f.evidence["case"])
    assert_rejected(again, Category.correctness)
    # ... while a power-of-two N has no padded lanes, so the bug is invisible there
    pow2 = run("softmax_tail_zero", "softmax", replay="float32/M=4,N=256/normal/contiguous/seed=11")
    assert pow2.accepted, pow2.reasons


# 2. wrong constants ----------------------------------------------------------------------------------
@pytest.mark.parametrize("candidate, task", [("gelu_no_half", "gelu"), ("leaky_relu_slope", "leaky_relu")])
def test_wrong_constant(candidate, task):
    v = run(candidate, task)
    assert_rejected(v, Category.correctness)
    assert minimal_case(v).evidence["max_abs_err"] > 0


# 3. contiguous-only kernels on a task that permits transposed/strided layouts --------------------------
@pytest.mark.parametrize("candidate", ["rowsum_flat_triton", "rowsum_flat_torch"])
def test_ignores_strides(candidate):
    v = run(candidate, "rowsum")
    assert_rejected(v, Category.correctness)
    f = minimal_case(v)
    assert set(f.evidence["layouts"]) & {"transposed", "strided"}, f.evidence["layouts"]
    # the contiguous cases (workload, boundaries) all passed: only the layouts betray it
    ev = v.stage("correctness").evidence
    assert ev["passed"] >= 10 and ev["failed"] <= 3, ev


# 4. reduced-precision accumulation ---------------------------------------------------------------------
@pytest.mark.parametrize("candidate", ["rowsum_bf16", "rowsum_fp16"])
def test_reduced_precision_accumulation(candidate):
    v = run(candidate, "rowsum")
    assert_rejected(v, Category.correctness)
    assert "outside" in v.reasons[0].message or "norm" in v.reasons[0].message


# 5. identity for a clamp over all reals ------------------------------------------------------------------
def test_identity_for_clamp():
    v = run("clamp_identity", "clamp")
    assert_rejected(v, Category.correctness)
    assert minimal_case(v).evidence["where"]  # some elements (those outside [-1, 1]) are located


# 6. constant outputs on a tiny-valued task: only the norm check can see them -----------------------------
@pytest.mark.parametrize("candidate", ["softmax_zeros", "softmax_mean"])
def test_constant_output_on_wide_softmax_caught_by_norm(candidate):
    v = run(candidate, "softmax_wide")
    assert_rejected(v, Category.correctness)
    f = minimal_case(v)
    assert f.evidence["values"] == "normal"
    assert "relative norm error" in f.message
    # on normal rows every element is within the task's loose atol: the norm check alone rejects
    assert "elements outside" not in f.message, f.message


def test_zeros_below_the_absolute_floor_caught_by_norm():
    v = run("tiny_scale_zeros", "tiny_scale")
    assert_rejected(v, Category.correctness)
    f = minimal_case(v)
    assert "relative norm error" in f.message
    assert "elements outside" not in f.message, f.message


# 7. shape-specialised kernel with no fallback ------------------------------------------------------------
def test_block_hardcoded_for_n1000_without_fallback():
    v = run("softmax_fixed_block", "softmax")
    assert_rejected(v, Category.correctness)
    n = minimal_case(v).evidence["dims"]["N"]
    assert n > 1024, f"only N > 1024 can fail, minimal case has N={n}"
    # it is right at the shape it was written for
    ok = run("softmax_fixed_block", "softmax", replay="float32/M=8,N=1000/normal/contiguous/seed=3")
    assert ok.accepted, ok.reasons


# 8. metadata ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("candidate, task, text", [
    ("rowsum_float64_out", "rowsum", "dtype torch.float64"),
    ("rowsum_keepdim", "rowsum", "shape"),
    ("relu_tuple", "relu", "tuple"),
])
def test_metadata(candidate, task, text):
    v = run(candidate, task)
    assert_rejected(v, Category.metadata)
    assert text in v.reasons[0].message


# 9. mutating an input the task does not allow to change ----------------------------------------------------
def test_mutates_input():
    v = run("relu_inplace", "relu")
    assert_rejected(v, Category.integrity)
    assert "mutated input" in v.reasons[0].message


# 10. robustness: raise, hang, segfault, exit, enormous allocation; assay carries on ---------------------------
def _overcommit_always() -> bool:
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1"
    except OSError:
        return False


@pytest.mark.parametrize("candidate, expect", [
    ("relu_raises", "raised"),
    ("relu_hangs", "hung"),
    ("relu_segfault", "SIGSEGV"),
    ("relu_exit", "exited"),
    pytest.param("relu_huge_alloc", "allocate", marks=pytest.mark.skipif(
        _overcommit_always(), reason="vm.overcommit_memory=1: the 4 TiB allocation is lazily granted "
                                     "(CPU workers have no default memory cap)")),
])
def test_robustness_then_good_candidate_accepted(candidate, expect):
    v = run(candidate, "relu", case_timeout=5)
    assert_rejected(v, Category.robustness)
    assert expect in v.reasons[0].message, v.reasons[0].message
    assert v.seconds < 30
    good = run("relu_torch", "relu", case_timeout=5)
    assert good.accepted, good.reasons


# 11. build: a C++ candidate with a compile error --------------------------------------------------------------
def test_cpp_compile_error_is_build_with_trimmed_message():
    v = run("rowsum_cpp_compile_error", "rowsum")
    assert_rejected(v, Category.build)
    assert v.candidate["language"] == "cpp"
    msg = v.reasons[0].message
    assert "undeclared_bias_term" in msg and "error" in msg
    assert "main.cpp:6" in msg  # the compiler's own error line, with its location
    assert len(msg.splitlines()) < 30, msg
    assert v.stage("correctness").status is Status.skipped


# 12. no entry point: a user error, raised before anything runs --------------------------------------------------
def test_missing_entry_point_is_candidate_error():
    with pytest.raises(CandidateError) as err:
        run("relu_wrong_name", "relu")
    assert isinstance(err.value, UserError)
    assert "relu" in str(err.value) and "relu_wrong_name.py" in str(err.value)


def test_a_failure_that_does_not_reproduce_is_rejected_and_called_nondeterministic():
    v = run("relu_wrong_first_call", "relu")
    assert_rejected(v, Category.correctness)
    f = minimal_case(v)
    assert "did not reproduce on a re-run with the same inputs" in f.message
    assert f.evidence["reproduced"] is False
    # a deterministic failure is not called nondeterministic
    v = run("softmax_tail_zero", "softmax")
    assert "did not reproduce" not in minimal_case(v).message
    assert "reproduced" not in minimal_case(v).evidence
