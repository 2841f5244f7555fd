"""Knowledge for the offline generator of ``assay optimize``: parametric Triton kernel templates.

    from assay.knowledge import match
    t = match(task)[0]                                     # templates computing the reference, best first
    src = t.render(task.entry_name, t.default_params())    # a complete candidate file
    for params in t.configs(): ...                         # the template's parameter space
"""

from __future__ import annotations

from assay.knowledge.base import KernelTemplate, OpCall, TensorArg, Trace, get_template, match, templates, trace_task

__all__ = ["KernelTemplate", "OpCall", "TensorArg", "Trace", "get_template", "match", "templates", "trace_task"]
