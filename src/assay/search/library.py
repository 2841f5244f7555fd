"""Library candidates: the reference itself (eager) and torch.compile of it, as candidate files.

They are "existing primitives": the answer when no kernel beats them. Each is a complete file
that `assay check --allow-primitive` accepts, written by ``measure.baselines`` (the same files
the timing stage times as baselines).
"""

from __future__ import annotations

from assay.measure.baselines import baseline_source
from assay.task.spec import Task


def library_candidates(task: Task, names: tuple[str, ...] = ("eager", "compile")) -> dict[str, str]:
    """name -> candidate source (empty when the task has no source file)."""
    out = {n: baseline_source(task, n, task.dtypes[0]) for n in names}
    return {n: s for n, s in out.items() if s is not None}
