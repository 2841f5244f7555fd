"""KernelBench problem files: dims, fixed constants, domains, sidecars, and an end-to-end check."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
import torch

from assay.errors import TaskError
from assay.task import load_task
from assay.verdict import Category

REDUCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=reduce_dim)

batch_size = 16
dim = 64
reduce_dim = 1

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""

LINEAR = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))

batch_size = 16
in_features = 32
out_features = 8

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
"""

LOG = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log(x)

batch_size = 16
dim = 64

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
"""

RELU = LOG.replace("torch.log(x)", "torch.relu(x)").replace("torch.rand(", "torch.randn(")

TWO_INPUTS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b

M = 8
N = 4

def get_inputs():
    return [torch.randn(M, N), torch.randn(M, N)]

def get_init_inputs():
    return []
"""


def _write(tmp_path: Path, text: str, name: str = "problem.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _one_line_error(path, *, names: Path, sidecar=None) -> str:
    with pytest.raises(TaskError) as ei:
        load_task(path, sidecar) if sidecar is not None else load_task(path)
    msg = str(ei.value)
    assert "\n" not in msg, f"not one line: {msg!r}"
    assert str(names) in msg, f"does not name {names}: {msg!r}"
    return msg


# -- dims, fixed constants, rebinding -----------------------------------------------------

def test_dims_detected_and_reduction_axis_fixed(tmp_path):
    t = load_task(_write(tmp_path, REDUCE))
    assert t.kind == "kernelbench"
    assert t.entry_name == "ModelNew"
    assert t.is_module
    assert set(t.dims) == {"batch_size", "dim"}
    assert "reduce_dim" not in t.dims
    assert any("reduce_dim" in n and "fixed" in n for n in t.notes), t.notes
    assert [w.dims for w in t.workloads] == [{"batch_size": 16, "dim": 64}]
    assert t.dims["batch_size"].legal(32) and not t.dims["batch_size"].legal(33)
    assert [i.name for i in t.inputs] == ["x"]
    assert t.inputs[0].shape == (16, 64)
    assert t.dtypes == ("float32",)


def test_rebinding_gives_new_shapes(tmp_path):
    t = load_task(_write(tmp_path, REDUCE))
    assert t.input_shapes({"batch_size": 3, "dim": 5}) == [(3, 5)]
    assert t.input_shapes({"batch_size": 7}) == [(7, 64)]
    # rebinding is temporary: the defaults come back
    assert t.input_shapes({}) == [(16, 64)]
    x = torch.randn(4, 5)
    torch.testing.assert_close(t.reference()(x), x.sum(dim=1))


def test_two_inputs_named_from_forward(tmp_path):
    t = load_task(_write(tmp_path, TWO_INPUTS))
    assert [i.name for i in t.inputs] == ["a", "b"]
    assert t.input_shapes({"M": 2, "N": 3}) == [(2, 3), (2, 3)]


def test_linear_init_inputs_follow_dims(tmp_path):
    t = load_task(_write(tmp_path, LINEAR))
    assert set(t.dims) == {"batch_size", "in_features"}
    assert any("out_features" in n for n in t.notes)
    assert t.init_inputs({"batch_size": 16, "in_features": 32}) == [32, 8]
    assert t.init_inputs({"batch_size": 2, "in_features": 5}) == [5, 8]
    assert t.input_shapes({"batch_size": 2, "in_features": 5}) == [(2, 5)]
    torch.manual_seed(0)
    m = t.reference(*t.init_inputs({"batch_size": 2, "in_features": 5}))
    assert m(torch.randn(2, 5)).shape == (2, 8)


def test_integer_inputs_keep_their_dtype(tmp_path):
    src = """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, logits, target):
            return torch.nn.functional.cross_entropy(logits, target)

    batch_size = 8
    num_classes = 5

    def get_inputs():
        return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]

    def get_init_inputs():
        return []
    """
    t = load_task(_write(tmp_path, src))
    assert t.inputs[1].dtype == "int64"
    assert t.inputs[0].dtype is None
    fixed = t.fixed_inputs_fn({"batch_size": 4, "num_classes": 5}, 0)
    assert set(fixed) == {1}
    assert fixed[1].shape == (4,) and fixed[1].dtype == torch.int64
    assert int(fixed[1].max()) < 5


# -- domain inference ----------------------------------------------------------------------

def test_log_gets_positive_domain(tmp_path):
    t = load_task(_write(tmp_path, LOG))
    dom = t.inputs[0].domain
    assert dom.low > 0
    assert dom.high <= 1.0
    assert any("domain" in n for n in t.notes)


def test_relu_keeps_any_real(tmp_path):
    t = load_task(_write(tmp_path, RELU))
    dom = t.inputs[0].domain
    assert dom.unbounded
    assert dom.describe() == "any reals"


# -- sidecar ------------------------------------------------------------------------------

def test_sidecar_overrides_domain_layouts_and_dim_range(tmp_path):
    p = _write(tmp_path, LOG)
    (tmp_path / "problem.assay.json").write_text(json.dumps({
        "inputs": {"x": {"domain": [0.5, 2.0], "layouts": ["contiguous", "transposed"], "special": ["inf"]}},
        "dims": {"dim": [8, 256]},
    }))
    t = load_task(p)
    x = t.inputs[0]
    assert (x.domain.low, x.domain.high) == (0.5, 2.0)
    assert x.layouts == ("contiguous", "transposed")
    assert x.special == ("inf",)
    assert (t.dims["dim"].low, t.dims["dim"].high) == (8, 256)
    assert (t.dims["batch_size"].low, t.dims["batch_size"].high) == (1, 32)  # untouched
    assert any("sidecar applied" in n for n in t.notes)


def test_sidecar_by_index_and_workloads(tmp_path):
    p = _write(tmp_path, TWO_INPUTS)
    side = tmp_path / "custom.json"
    side.write_text(json.dumps({
        "inputs": {"1": {"domain": [-1, 1]}},
        "workloads": [{"dims": {"M": 4, "N": 2}, "weight": 3}],
        "tolerance": {"float32": [1e-4, 1e-4]},
    }))
    t = load_task(p, side)
    assert (t.inputs[1].domain.low, t.inputs[1].domain.high) == (-1.0, 1.0)
    assert t.inputs[0].domain.unbounded
    assert [(w.dims, w.weight) for w in t.workloads] == [({"M": 4, "N": 2}, 3.0)]
    assert t.tolerance == {"float32": [1e-4, 1e-4]}


def test_sidecar_layout_as_single_string(tmp_path):
    p = _write(tmp_path, RELU)
    (tmp_path / "problem.assay.json").write_text(json.dumps({"inputs": {"x": {"layouts": "transposed"}}}))
    assert load_task(p).inputs[0].layouts == ("transposed",)


@pytest.mark.parametrize("content, needle", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"inputs": {"nope": {"domain": [0, 1]}}}', "unknown input 'nope'"),
    ('{"dims": {"nope": [1, 2]}}', "unknown dim 'nope'"),
    ('{"dims": {"dim": [10, 5]}}', "empty"),
    ('{"dims": {"dim": 7}}', "malformed sidecar"),
    ('{"inputs": {"x": {"domain": [2, 1]}}}', "exceeds"),
    ('{"inputs": {"x": {"layouts": ["sideways"]}}}', "unknown layout 'sideways'"),
    ('{"inputs": [1, 2]}', "'inputs' must be a JSON object"),
    ('{"inputs": {"x": "positive"}}', "must be a JSON object"),
    ('{"dims": [["dim", 1, 2]]}', "'dims' must be a JSON object"),
    ('{"dims": {"dim": [1, 16]}}', "outside its legal range"),  # default workload dim=64 now illegal
    ('{"workloads": [{"weight": 1}]}', "malformed sidecar"),
    ('{"tolerance": {"float32": 0.1}}', "tolerance"),
])
def test_malformed_sidecar_is_one_line_naming_it(tmp_path, content, needle):
    p = _write(tmp_path, RELU)
    side = tmp_path / "problem.assay.json"
    side.write_text(content)
    msg = _one_line_error(p, names=side)
    assert needle in msg, msg


def test_undecodable_sidecar(tmp_path):
    p = _write(tmp_path, RELU)
    side = tmp_path / "problem.assay.json"
    side.write_bytes(b"\xff\xfe{")
    assert "invalid JSON" in _one_line_error(p, names=side)


def test_explicit_missing_sidecar_is_an_error(tmp_path):
    p = _write(tmp_path, RELU)
    side = tmp_path / "missing.json"
    assert "no such sidecar" in _one_line_error(p, names=side, sidecar=side)


# -- malformed problems --------------------------------------------------------------------

def test_problem_lacking_get_inputs(tmp_path):
    src = RELU.replace("def get_inputs():\n    return [torch.randn(batch_size, dim)]\n", "")
    assert "def get_inputs" not in src
    p = _write(tmp_path, src)
    msg = _one_line_error(p, names=p)
    assert "get_inputs" in msg


def test_problem_whose_get_inputs_raises(tmp_path):
    src = RELU.replace("return [torch.randn(batch_size, dim)]", "raise RuntimeError('no data\\nhere')")
    p = _write(tmp_path, src)
    msg = _one_line_error(p, names=p)
    assert "get_inputs() failed" in msg


def test_problem_returning_no_inputs(tmp_path):
    src = RELU.replace("return [torch.randn(batch_size, dim)]", "return []")
    p = _write(tmp_path, src)
    assert "no inputs" in _one_line_error(p, names=p)


def test_problem_with_non_tensor_input(tmp_path):
    src = RELU.replace("return [torch.randn(batch_size, dim)]", "return [torch.randn(batch_size, dim), 3.5]")
    p = _write(tmp_path, src)
    assert "not a tensor" in _one_line_error(p, names=p)


def test_problem_syntax_error(tmp_path):
    p = _write(tmp_path, RELU.replace("def forward(self, x):", "def forward(self, x)"))
    assert "syntax error" in _one_line_error(p, names=p)


def test_model_not_a_module(tmp_path):
    src = RELU.replace("class Model(nn.Module):", "class Model:")
    p = _write(tmp_path, src)
    assert "nn.Module" in _one_line_error(p, names=p)


# -- end to end -----------------------------------------------------------------------------

GOOD_REDUCE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.zeros(x.shape[0], dtype=x.dtype)
        for j in range(x.shape[1]):
            out = out + x[:, j]
        return out
"""

BAD_REDUCE = GOOD_REDUCE.replace("range(x.shape[1])", "range(x.shape[1] - 1)")

GOOD_LINEAR = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.clamp_min(x @ self.fc.weight.t() + self.fc.bias, 0)
"""

# Same architecture, but its weights come from another seed: must be rejected.
RESEEDED_LINEAR = GOOD_LINEAR.replace("super().__init__()", "super().__init__()\n        torch.manual_seed(12345)")


def _check(tmp_path, cand_src, prob_src):
    from assay.evaluate import check

    prob = _write(tmp_path, prob_src, "problem.py")
    cand = _write(tmp_path, cand_src, "candidate.py")
    return check(cand, prob, device="cpu", time_budget=5, cache_dir=tmp_path / "cache",
                 require_custom_kernel=False, timing=False)


def test_end_to_end_correct_model_new_accepted(tmp_path):
    v = _check(tmp_path, GOOD_REDUCE, REDUCE)
    assert v.accepted, v.reasons
    ev = v.stage("correctness").evidence
    assert ev["passed"] > 0 and ev["failed"] == 0


def test_end_to_end_wrong_model_new_rejected(tmp_path):
    v = _check(tmp_path, BAD_REDUCE, REDUCE)
    assert not v.accepted
    assert Category.correctness in v.categories, v.reasons


def test_end_to_end_linear_weights_match(tmp_path):
    v = _check(tmp_path, GOOD_LINEAR, LINEAR)
    assert v.accepted, v.reasons
    assert math.isfinite(v.stage("correctness").evidence["max_abs_err"])


def test_end_to_end_linear_with_other_weights_rejected(tmp_path):
    v = _check(tmp_path, RESEEDED_LINEAR, LINEAR)
    assert not v.accepted
    assert Category.correctness in v.categories, v.reasons
