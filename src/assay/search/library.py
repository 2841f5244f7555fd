"""Library candidates: the reference itself (eager) and torch.compile of it, as candidate files.

They are "existing primitives": the answer when no kernel beats them. Each is a complete file
that `assay check --allow-primitive` accepts.
"""

from __future__ import annotations

from assay.task.spec import Task


def library_candidates(task: Task) -> dict[str, str]:
    """name -> candidate source."""
    if not task.source:
        return {}
    entry = task.entry_name
    ref = getattr(task.reference, "__name__", "Model")
    base = task.source.rstrip() + "\n\n# --- assay library candidate ---\n"
    out: dict[str, str] = {}
    if task.is_module:
        out["eager"] = base + f"ModelNew = {ref}\n"
        out["compile"] = base + (
            "import torch as _t\n\n\nclass ModelNew(" + ref + "):\n"
            "    def __init__(self, *a, **k):\n        super().__init__(*a, **k)\n"
            "        self._c = _t.compile(super().forward)\n\n"
            "    def forward(self, *a):\n        return self._c(*a)\n")
    else:
        out["eager"] = base + ("" if entry == ref else f"{entry} = {ref}\n")
        out["compile"] = base + f"import torch as _t\n\n_compiled = _t.compile({ref})\n\n\ndef {entry}(*args):\n    return _compiled(*args)\n"
    return out
