"""Baselines as candidate files: the reference itself (eager) and torch.compile of it.

Written as complete candidate sources so that a baseline is loaded and timed by exactly the
same worker code as the candidate (its own process, same loop, same flush, same inputs): an
A/A comparison is then symmetric by construction. The optimizer also offers them as library
candidates ("existing primitives": the answer when no kernel beats them).
"""

from __future__ import annotations

from pathlib import Path

from assay.config import known_baseline as known
from assay.task.spec import Task

FLOATING = ("float16", "bfloat16", "float32", "float64")


def compile_mode(name: str) -> str | None:
    """torch.compile's ``mode`` for baseline ``name`` ("compile:MODE"; None for "compile")."""
    return name.split(":", 1)[1] if ":" in name else None


def baseline_source(task: Task, name: str, dtype: str | None = None) -> str | None:
    """Candidate source for baseline ``name`` ("eager", "compile" or "compile:MODE"); ``None``
    when the task has no source file to build it from. ``dtype``: a module's parameters are cast
    to the test dtype, as the evaluator's reference is."""
    if not task.source:
        return None
    if not known(name):
        raise ValueError(f"unknown baseline {name!r} (eager, compile, compile:MODE)")
    mode = compile_mode(name)
    # dynamic=False: a kernel specialised to each workload shape, as a user compiling for that shape
    # gets (by default torch.compile turns dynamic at the second shape: slower kernels, flattering speedups)
    compile_args = ", dynamic=False" + (f", mode={mode!r}" if mode else "")
    entry = task.entry_name
    ref = getattr(task.reference, "__name__", "Model")
    # the task's own location, so a task that finds its siblings through __file__ still does
    head = f"__file__ = {str(Path(task.path).resolve())!r}\n" if task.path else ""
    src = head + task.source.rstrip() + "\n\n# --- assay baseline: " + name + " ---\nimport torch as _t\n"
    if task.is_module:
        cast = f"        self.to(_t.{dtype})\n" if dtype in FLOATING else ""
        call = f"_t.compile(super().forward{compile_args})" if name != "eager" else "super().forward"
        return src + (
            f"\n\nclass ModelNew({ref}):\n"
            "    def __init__(self, *a, **k):\n        super().__init__(*a, **k)\n"
            f"{cast}        self._c = {call}\n\n"
            "    def forward(self, *a):\n        return self._c(*a)\n")
    if name == "eager":
        return src + ("" if entry == ref else f"{entry} = {ref}\n")
    return src + f"\n_compiled = _t.compile({ref}{compile_args})\n\n\ndef {entry}(*args):\n    return _compiled(*args)\n"
