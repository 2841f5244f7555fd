"""Integrity gates: each benchmark-gaming cheat is rejected, and the named gate is what rejects it.

For every gate there is a pair of checks: the cheat with all gates on is REJECTED (category
integrity, the gate's own message), and the same cheat with only that gate switched off
(``gates_off``, a test-only switch) is ACCEPTED. The pairs are tabulated in docs/integrity.md.
Look-alikes (the legitimate thing a gate must not reject) are accepted with all gates on.

Everything runs on the CPU (Triton under TRITON_INTERPRET=1), with small shapes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assay.evaluate import check
from assay.task import load_task
from assay.verdict import Category, Status, Verdict

HERE = Path(__file__).parent
CANDIDATES = HERE / "candidates"
TASKS = HERE / "tasks"
BUDGET = 2.0  # seconds of correctness cases per evaluation (at least 12 cases and every workload run anyway)


def run(candidate: str, task: str, **kw: object) -> Verdict:
    kw.setdefault("require_custom_kernel", False)  # plain-torch cheats: only the primitive tests require a kernel
    kw.setdefault("timing", False)
    kw.setdefault("time_budget", BUDGET)
    kw.setdefault("case_timeout", 10)
    return check(CANDIDATES / f"{candidate}.py", TASKS / f"{task}.py", device="cpu", **kw)


def why(v: Verdict) -> list[tuple[str, str]]:
    return [(r.category.value, r.message) for r in v.reasons]


def assert_rejected(v: Verdict, category: Category, text: str) -> None:
    assert not v.accepted, f"cheat ACCEPTED: {v.candidate['path']}"
    assert v.categories == {category}, why(v)
    assert any(text in r.message for r in v.reasons), why(v)


def assert_accepted(v: Verdict) -> None:
    assert v.accepted, f"REJECTED: {why(v)}"
    assert v.reasons == []


# -- gate pairs: (gate, candidate, task, check options, category, the gate's message) -----------------------
# the rows of the table in docs/integrity.md
I, C = Category.integrity, Category.correctness
PAIRS = [
    ("stability", "relu_late_overwrite", "relu", {}, I, "changed after the call returned"),
    ("exact_type", "relu_lazy_subclass", "relu", {}, I, "not a plain torch.Tensor"),
    ("alias", "relu_return_input", "relu_positive", {}, I, "shares storage with input"),
    ("mutation", "relu_zero_input", "relu", {}, I, "mutated input(s) [0]"),
    ("norm", "tiny_scale_zeros", "tiny_scale_unit", {}, C, "relative norm error"),
    ("tamper", "relu_fake_clock", "relu", {"timing": True}, I, "timing functions replaced by the candidate"),
    ("recheck", "relu_replay_after_n", "relu", {"timing": True}, I, "output computed inside the timing loop is wrong"),
    ("primitive", "softmax_try_fallback", "softmax", {"require_custom_kernel": True}, I, "no custom kernel ran"),
    ("primitive", "relu_decoy_kernel", "relu", {"require_custom_kernel": True}, I, "no custom kernel ran"),
]


@pytest.mark.parametrize("gate, candidate, task, opts, category, text", PAIRS, ids=[f"{p[0]}-{p[1]}" for p in PAIRS])
def test_gate_rejects_cheat_and_is_what_rejects_it(gate, candidate, task, opts, category, text):
    on = run(candidate, task, **opts)
    assert_rejected(on, category, text)
    off = run(candidate, task, gates_off=frozenset({gate}), **opts)
    assert_accepted(off)


# -- stability --------------------------------------------------------------------------------------------
def test_late_fill_from_a_background_thread_is_an_integrity_failure():
    """torch.empty returned at once, filled by a thread 20 ms later. The stability gate sees the
    output change after the call returned; that (not the wrong values other cases read before the
    fill) is the reason given."""
    v = run("relu_late_fill", "relu")
    assert_rejected(v, Category.integrity, "changed after the call returned")
    corr = v.stage("correctness")
    assert corr.evidence["threads_left_running"] >= 1
    # with the gate off it is still rejected on the CPU, as wrong values: nothing waits between the
    # return and the read, so cases read the unfilled buffer (the gate is what names the cheat)
    off = run("relu_late_fill", "relu", gates_off=frozenset({"stability"}))
    assert not off.accepted
    assert off.categories == {Category.correctness}, why(off)


# -- aliasing and mutation look-alikes ------------------------------------------------------------------------
def test_fresh_output_on_the_positive_domain_is_accepted():
    """The control for the alias pair: a real relu (a new tensor) on the same task is accepted."""
    assert_accepted(run("relu_torch", "relu_positive"))


def test_in_place_is_accepted_when_the_task_declares_mutation():
    """LOOK-ALIKE of both the alias and the mutation cheat: the task says mutates_inputs=True."""
    assert load_task(TASKS / "relu_inplace.py").mutates_inputs
    assert_accepted(run("relu_inplace_ok", "relu_inplace"))


def test_same_in_place_code_rejected_where_inputs_are_read_only(tmp_path):
    """...and the same code, under the read-only relu task's entry name, is an integrity failure."""
    src = (CANDIDATES / "relu_inplace_ok.py").read_text().replace("def relu_(x):", "def relu(x):")
    cand = tmp_path / "relu_inplace_as_relu.py"
    cand.write_text(src)
    v = check(cand, TASKS / "relu.py", device="cpu", require_custom_kernel=False, timing=False,
              time_budget=BUDGET, case_timeout=10)
    assert not v.accepted
    assert v.categories == {Category.integrity}, why(v)
    assert re.search(r"mutated input|shares storage", v.reasons[0].message), why(v)


# -- caching ----------------------------------------------------------------------------------------------------
def test_cache_by_shape_is_a_correctness_failure():
    """Output of the first call per shape replayed for later calls of that shape: the gauntlet runs
    every workload twice with fresh values (kind "repeat") and other cases share shapes, so the
    stale output is caught as wrong values (category correctness, not integrity)."""
    v = run("relu_cache_by_shape", "relu")
    assert not v.accepted
    assert v.categories == {Category.correctness}, why(v)
    corr = v.stage("correctness")
    assert corr.evidence["failed"] >= 1
    assert "repeat" in corr.evidence["kinds"]


# -- timer tampering ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("candidate, text", [
    ("relu_fake_timing_clock", "assay timing clock"),  # the timing module's clock replaced: identity check
    ("relu_swap_timing_code", "shorter than the wall time"),  # identities kept, code swapped: outside clock
])
def test_faked_worker_clock_is_caught_by_tamper_and_would_fake_a_10x_speedup(candidate, text):
    """The candidate makes the worker's timing loop report samples 10x too short. With the gate on:
    rejected. With it off: accepted, with a ~10x 'speedup' over eager for what is plain torch.relu."""
    v = run(candidate, "relu", timing=True)
    assert_rejected(v, Category.integrity, text)
    off = run(candidate, "relu", timing=True, gates_off=frozenset({"tamper"}))
    assert_accepted(off)
    assert off.stage("timing").evidence["geomean_speedup"]["eager"] > 3


def test_honest_timing_is_close_to_the_outside_wall_clock():
    """LOOK-ALIKE for the outside-clock check: plain torch.relu (a few microseconds a call, where the
    per-request overhead weighs most) stays far below the limit."""
    v = run("relu_torch", "relu", timing=True)
    assert_accepted(v)
    (shape,) = v.stage("timing").evidence["shapes"]
    assert shape["wall_ratio"] < 6, shape["wall_ratio"]
    assert 0.3 < v.stage("timing").evidence["geomean_speedup"]["eager"] < 3


# -- timing-loop replay --------------------------------------------------------------------------------------------
def test_replay_starts_after_the_gauntlet_so_only_recheck_sees_it():
    src = (CANDIDATES / "relu_replay_after_n.py").read_text()
    n = int(re.search(r"^N = (\d+)", src, re.M).group(1))
    v = run("relu_replay_after_n", "relu", timing=True)
    assert_rejected(v, Category.integrity, "cached or replayed results")
    corr, integ, timing = v.stage("correctness"), v.stage("integrity"), v.stage("timing")
    assert corr.status is Status.passed and integ.status is Status.passed  # correct while N is not reached
    calls_before_timing = corr.evidence["ran"] + len(integ.evidence["shapes"])
    assert calls_before_timing < n, (calls_before_timing, n)
    assert timing.status is Status.failed


# -- primitive detection -----------------------------------------------------------------------------------------
def _paths(v: Verdict) -> set[str]:
    return {s["path"] for s in v.stage("integrity").evidence["shapes"]}


def test_try_except_fallback_is_labelled_reference_op_fallback():
    v = run("softmax_try_fallback", "softmax", require_custom_kernel=True)
    assert_rejected(v, Category.integrity, "no custom kernel ran")
    assert v.candidate["language"] == "triton"
    assert v.candidate["label"] == "existing primitive"
    assert _paths(v) == {"reference-op fallback"}
    assert v.stage("integrity").evidence["fallback_weight_fraction"] == 1.0
    # the static scan points at the except line (supporting evidence, it does not reject)
    assert any(f.line and "try/except" in f.message for f in v.stage("static_scan").findings)


def test_decoy_kernel_with_torch_ops_is_labelled_torch_ops():
    v = run("relu_decoy_kernel", "relu", require_custom_kernel=True)
    assert_rejected(v, Category.integrity, "no custom kernel ran")
    assert _paths(v) == {"torch ops"}
    shape = v.stage("integrity").evidence["shapes"][0]
    assert {"gt", "mul"} <= set(shape["candidate_compute_ops"])
    assert not set(shape["candidate_compute_ops"]) & set(shape["reference_compute_ops"])


def test_specialised_kernel_with_torch_fallback_elsewhere_is_accepted():
    """LOOK-ALIKE: a Triton kernel at the workload shapes, torch.softmax for other shapes/layouts."""
    v = run("softmax_workload_kernel", "softmax", require_custom_kernel=True)
    assert_accepted(v)
    integ = v.stage("integrity")
    assert v.candidate["label"] == "custom kernel"
    assert _paths(v) == {"custom kernel"}
    assert integ.evidence["fallback_weight_fraction"] == 0.0
    assert integ.status is Status.passed  # no fallback finding at all: the workloads are all custom
    kinds = v.stage("correctness").evidence["kinds"]
    assert "workload" in kinds and "layout" in kinds  # the kernel path and the torch path both ran


# -- reading the evaluator --------------------------------------------------------------------------------------
def test_searching_the_heap_and_frames_for_the_expected_output_finds_nothing():
    """The reference never runs in the worker: there is no expected output to steal."""
    v = run("relu_steal_expected", "relu")
    assert not v.accepted
    assert v.categories == {Category.correctness}, why(v)
    lines = (CANDIDATES / "relu_steal_expected.py").read_text().splitlines()
    scan = v.stage("static_scan")
    assert scan.status is Status.warning
    hits = [f for f in scan.findings if "introspection" in f.message]
    assert hits and all(f.line for f in hits)
    flagged = {f.line for f in hits}
    for needle in ("sys._getframe(1)", "gc.get_objects()", "frame.f_back"):
        lineno = next(i for i, line in enumerate(lines, 1) if needle in line)
        assert lineno in flagged, (needle, lineno, sorted(flagged))
        assert any(f"line {lineno}:" in f.message for f in hits)
    assert all(not f.rejects for f in scan.findings)  # the runtime gates decide, not the scan
