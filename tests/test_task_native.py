"""Native task files: the example loads; every malformed file is one line naming file and problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import assay
from assay.errors import TaskError
from assay.task import load_task

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "softmax_task.py"

GOOD = """
import torch
import assay

def double(x):
    return x * 2

task = assay.Task(
    name="double",
    reference=double,
    dims=DIMS,
    inputs=[assay.Input("x", SHAPE, dtype=DTYPE, layouts=LAYOUTS)],
    workloads=[assay.Workload(WORKLOAD)],
)
"""


def _task_src(dims='{"N": assay.Dim(1, 1024)}', shape='("N",)', dtype="None", layouts='("contiguous",)',
              workload='{"N": 64}') -> str:
    return (GOOD.replace("DIMS", dims).replace("SHAPE", shape).replace("DTYPE", dtype)
            .replace("LAYOUTS", layouts).replace("WORKLOAD", workload))


def _write(tmp_path: Path, text: str, name: str = "task_file.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _load_error(path: Path) -> str:
    with pytest.raises(TaskError) as ei:
        load_task(path)
    msg = str(ei.value)
    assert "\n" not in msg, f"error is not one line: {msg!r}"
    assert str(path) in msg, f"error does not name the file: {msg!r}"
    assert ei.value.path == str(path)
    return msg


# -- the example -------------------------------------------------------------------------

def test_softmax_example_loads():
    t = load_task(EXAMPLE)
    assert isinstance(t, assay.Task)
    assert t.kind == "native"
    assert t.name == "softmax"
    assert t.path == str(EXAMPLE)
    assert "torch.softmax" in t.source
    assert set(t.dims) == {"M", "N"}
    assert (t.dims["M"].low, t.dims["M"].high) == (1, 4096)
    assert [w.dims for w in t.workloads] == [{"M": 256, "N": 1000}, {"M": 64, "N": 4096}]
    assert [w.weight for w in t.workloads] == [2.0, 1.0]
    assert t.input_shapes({"M": 3, "N": 5}) == [(3, 5)]
    assert t.inputs[0].layouts == ("contiguous", "transposed", "strided", "offset")
    assert t.inputs[0].special == ("inf",)
    assert t.entry_name == "softmax"
    assert not t.is_module
    x = torch.randn(3, 5)
    torch.testing.assert_close(t.reference(x), torch.softmax(x, dim=-1))
    d = t.describe()
    assert d["inputs"][0]["domain"] == "any reals"
    assert d["dtypes"] == ["float32"]


def test_example_loads_twice_independently():
    a, b = load_task(EXAMPLE), load_task(EXAMPLE)
    assert a is not b
    assert a.reference is not b.reference


def test_good_generated_task_loads(tmp_path):
    t = load_task(_write(tmp_path, _task_src()))
    assert t.name == "double"
    assert t.input_shapes({"N": 7}) == [(7,)]


def test_task_bound_as_TASK(tmp_path):
    src = _task_src().replace("task = assay.Task(", "TASK = assay.Task(")
    assert load_task(_write(tmp_path, src)).name == "double"


def test_default_workload_is_clamped_into_range(tmp_path):
    src = """
    import assay
    task = assay.Task(name="t", reference=lambda x: x, dims={"N": assay.Dim(1, 32)},
                      inputs=[assay.Input("x", ("N",))])
    """
    t = load_task(_write(tmp_path, src))
    assert [w.dims for w in t.workloads] == [{"N": 32}]


# -- malformed task files --------------------------------------------------------------

def test_syntax_error(tmp_path):
    p = _write(tmp_path, "import assay\ntask = assay.Task(\n  name='x',,\n)\n")
    msg = _load_error(p)
    assert "syntax error" in msg and "line 3" in msg


def test_missing_task(tmp_path):
    p = _write(tmp_path, "import torch\n\ndef f(x):\n    return x\n")
    msg = _load_error(p)
    assert "task" in msg and "defines no" in msg


def test_task_is_not_a_task(tmp_path):
    msg = _load_error(_write(tmp_path, "task = {'name': 'x'}\n"))
    assert "not an assay.Task" in msg


def test_undeclared_dim_in_shape(tmp_path):
    msg = _load_error(_write(tmp_path, _task_src(shape='("N", "K")')))
    assert "undeclared dim" in msg and "'K'" in msg


def test_workload_outside_dim_range(tmp_path):
    msg = _load_error(_write(tmp_path, _task_src(workload='{"N": 5000}')))
    assert "N=5000" in msg and "outside" in msg


def test_workload_naming_unknown_dim(tmp_path):
    msg = _load_error(_write(tmp_path, _task_src(workload='{"N": 4, "Q": 3}')))
    assert "unknown dim" in msg and "'Q'" in msg


def test_unknown_dtype(tmp_path):
    msg = _load_error(_write(tmp_path, _task_src(dtype='"float8"')))
    assert "unknown dtype" in msg and "'float8'" in msg


def test_unknown_task_dtype(tmp_path):
    src = _task_src().replace('name="double",', 'name="double", dtypes=["half_float"],')
    msg = _load_error(_write(tmp_path, src))
    assert "unknown dtype" in msg and "'half_float'" in msg


def test_unknown_layout(tmp_path):
    msg = _load_error(_write(tmp_path, _task_src(layouts='("contiguous", "diagonal")')))
    assert "unknown layout" in msg and "'diagonal'" in msg


def test_empty_dim_range(tmp_path):
    msg = _load_error(_write(tmp_path, _task_src(dims='{"N": assay.Dim(10, 2)}')))
    assert "empty" in msg


def test_task_raises_on_import(tmp_path):
    src = """
    import assay
    raise ValueError("cannot find the weights")
    """
    msg = _load_error(_write(tmp_path, src))
    assert "ValueError" in msg and "cannot find the weights" in msg


def test_task_raises_multiline_message_on_import(tmp_path):
    src = """
    raise RuntimeError("first line\\nsecond line\\n  third line")
    """
    msg = _load_error(_write(tmp_path, src))
    assert "RuntimeError" in msg and "first line" in msg


def test_task_calls_sys_exit_on_import(tmp_path):
    src = """
    import sys
    sys.exit(3)
    """
    msg = _load_error(_write(tmp_path, src))
    assert "SystemExit" in msg


def test_task_import_of_missing_module(tmp_path):
    msg = _load_error(_write(tmp_path, "import assay_no_such_module_xyz\n"))
    assert "ModuleNotFoundError" in msg


def test_task_declares_no_inputs(tmp_path):
    src = """
    import assay
    task = assay.Task(name="t", reference=lambda: 1)
    """
    msg = _load_error(_write(tmp_path, src))
    assert "no inputs" in msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.py"
    with pytest.raises(TaskError) as ei:
        load_task(p)
    msg = str(ei.value)
    assert "\n" not in msg and str(p) in msg and "no such" in msg


def test_directory_is_not_a_task(tmp_path):
    with pytest.raises(TaskError) as ei:
        load_task(tmp_path)
    assert str(tmp_path) in str(ei.value) and "\n" not in str(ei.value)


def test_undecodable_file(tmp_path):
    p = tmp_path / "binary.py"
    p.write_bytes(b"\xff\xfe\x00task = 1\n")
    with pytest.raises(TaskError) as ei:
        load_task(p)
    assert str(p) in str(ei.value) and "\n" not in str(ei.value)


def test_failed_load_leaves_no_module_behind(tmp_path):
    import sys

    before = {k for k in sys.modules if k.startswith("assay_user_")}
    with pytest.raises(TaskError):
        load_task(_write(tmp_path, "raise KeyError('x')\n"))
    load_task(EXAMPLE)
    assert {k for k in sys.modules if k.startswith("assay_user_")} == before


def test_null_bytes_are_a_syntax_error_without_line_none(tmp_path):
    p = tmp_path / "nul.py"
    p.write_bytes(b"import assay\nx = 1\x00\n")
    msg = _load_error(p)
    assert "syntax error" in msg and "None" not in msg


def test_exception_without_message(tmp_path):
    msg = _load_error(_write(tmp_path, "raise ValueError()\n"))
    assert msg.endswith("raised ValueError while loading")
