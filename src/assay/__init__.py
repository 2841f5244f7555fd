"""assay: make GPU kernels faster and prove it.

The evaluator is a library: ``assay.check(candidate, task)`` returns a ``Verdict``.
Names are imported lazily, so the sandboxed worker (which imports ``assay.sandbox.worker``)
loads nothing but torch and its own protocol.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Task": "assay.task.spec", "Dim": "assay.task.spec", "Domain": "assay.task.spec",
    "Input": "assay.task.spec", "Workload": "assay.task.spec", "REAL": "assay.task.spec",
    "POSITIVE": "assay.task.spec", "UNIT": "assay.task.spec", "load_task": "assay.task",
    "Verdict": "assay.verdict", "Category": "assay.verdict", "check": "assay.evaluate",
    "CheckConfig": "assay.config",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'assay' has no attribute {name!r}")
