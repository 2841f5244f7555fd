"""assay: make GPU kernels faster and prove it.

The evaluator is a library: ``assay.check(candidate, task)`` returns a ``Verdict``.
"""

from assay.task import POSITIVE, REAL, UNIT, Dim, Domain, Input, Task, Workload, load_task
from assay.verdict import Category, Verdict

__all__ = [
    "Task", "Dim", "Domain", "Input", "Workload", "REAL", "POSITIVE", "UNIT",
    "load_task", "Verdict", "Category", "check",
]


def check(candidate, task, **kwargs):  # noqa: ANN001, ANN003 - thin re-export
    """Run the whole gauntlet for one candidate; see ``assay.evaluate.check``."""
    from assay.evaluate import check as _check

    return _check(candidate, task, **kwargs)
