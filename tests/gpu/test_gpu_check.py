"""GPU checks (run on the H200 through the device tool; skipped without CUDA)."""

from pathlib import Path

import pytest
import torch

from assay.evaluate import check
from assay.verdict import Category

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

HERE = Path(__file__).parent / "candidates"
ROOT = Path(__file__).parents[2]
SOFTMAX = ROOT / "examples" / "softmax_task.py"
RELU = HERE / "relu_task.py"


def test_triton_softmax_accepted_on_cuda():
    v = check(ROOT / "examples" / "softmax_triton.py", SOFTMAX, device="cuda", time_budget=20, baselines=("eager",))
    assert v.accepted, v.reasons
    assert v.candidate["label"] == "custom kernel"
    assert v.stage("correctness").evidence["passed"] >= 12


def test_triton_softmax_tail_bug_rejected_on_cuda():
    v = check(ROOT / "examples" / "softmax_triton_tailbug.py", SOFTMAX, device="cuda", time_budget=20, baselines=("eager",))
    assert not v.accepted
    assert Category.correctness in v.categories
    ev = v.stage("correctness").findings[0].evidence
    assert ev["dims"]["N"] & (ev["dims"]["N"] - 1) != 0  # fails only off powers of two


def test_cuda_cpp_relu_accepted():
    v = check(HERE / "relu_cuda.py", RELU, device="cuda", time_budget=20, baselines=("eager",))
    assert v.accepted, v.reasons
    assert v.candidate["language"] == "cuda"


def test_cuda_compile_error_is_build_category():
    v = check(HERE / "relu_cuda_compile_error.py", RELU, device="cuda", time_budget=20, baselines=("eager",))
    assert not v.accepted
    assert v.reasons[0].category is Category.build
    assert "undefined_symbol_here" in v.reasons[0].message
    assert len(v.reasons[0].message.splitlines()) <= 30


def test_illegal_memory_access_is_robustness_and_next_candidate_runs():
    v = check(HERE / "relu_cuda_illegal_access.py", RELU, device="cuda", time_budget=20, case_timeout=60, baselines=("eager",))
    assert not v.accepted
    assert v.reasons[0].category is Category.robustness
    ok = check(HERE / "relu_cuda.py", RELU, device="cuda", time_budget=10, baselines=("eager",))
    assert ok.accepted, ok.reasons


def test_unwritten_output_rows_read_as_poison_and_are_rejected():
    v = check(HERE / "softmax_skips_last_row.py", SOFTMAX, device="cuda", time_budget=10, timing=False)
    assert not v.accepted
    assert Category.correctness in v.categories
    f = v.stage("correctness").findings[0]
    assert "NaN" in f.message  # the poisoned allocator, not stale data, fills the unwritten row
    assert f.evidence["where"]  # (the minimal case may be one row: then "every element")
