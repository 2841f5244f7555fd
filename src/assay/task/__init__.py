"""Tasks: the reference operation and its contract (native files and KernelBench problems)."""

from __future__ import annotations

import re
from pathlib import Path

from assay.errors import TaskError
from assay.task.kernelbench import load_kernelbench
from assay.task.native import load_native
from assay.task.spec import POSITIVE, REAL, UNIT, Dim, Domain, Input, Task, Workload

__all__ = ["Task", "Dim", "Domain", "Input", "Workload", "REAL", "POSITIVE", "UNIT", "load_task"]

# get_init_inputs too, so a problem that lacks get_inputs is reported as such
_KB = re.compile(r"^def get_(?:init_)?inputs\s*\(", re.M)


def load_task(path: str | Path, sidecar: str | Path | None = None) -> Task:
    """Load a native task file or a KernelBench problem file."""
    p = Path(path)
    if not p.is_file():
        raise TaskError("no such task file", str(p))
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read: {e}", str(p)) from None
    if _KB.search(text) and "class Model" in text:
        return load_kernelbench(p, Path(sidecar) if sidecar else None)
    return load_native(p)
