"""Native task files: a Python file that binds ``task = assay.Task(...)``."""

from __future__ import annotations

from pathlib import Path

from assay.errors import TaskError
from assay.task.modload import import_file
from assay.task.spec import Task


def load_native(path: Path) -> Task:
    module = import_file(path, TaskError)
    task = getattr(module, "task", None) or getattr(module, "TASK", None)
    if task is None:
        raise TaskError("defines no `task = assay.Task(...)`", str(path))
    if not isinstance(task, Task):
        raise TaskError(f"`task` is a {type(task).__name__}, not an assay.Task", str(path))
    task.path = str(path)
    task.kind = "native"
    task.source = path.read_text()
    if not task.inputs and task.shape_fn is None:
        raise TaskError("task declares no inputs", str(path))
    return task
