"""Prompts from the templates in ``assay/generators/prompts/*.md`` (package data).

Templates are ``string.Template`` text: ``$name`` is filled from the Request; a literal
dollar is ``$$``. ``render_chat`` gives the (system, user) messages of an LLM call;
``render_agent`` gives the files of an agent's workspace.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any

from assay.generators.base import MODES

MAX_ATTEMPTS = 4  # previous attempts shown in full in "new" mode
MAX_HISTORY = 3  # earlier attempts shown (verdicts only) in "debug"/"repair" mode
MAX_SUMMARY_CHARS = 6000  # a verdict summary longer than this is cut in the middle


@lru_cache(maxsize=None)
def template(name: str) -> Template:
    """The template ``prompts/NAME.md``."""
    text = resources.files("assay.generators").joinpath("prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text)


def fill(name: str, **values: Any) -> str:
    return template(name).substitute({k: str(v) for k, v in values.items()})


def trim(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    """``text`` cut to about ``limit`` characters: the head (where the first error is) and the tail."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head, tail = (limit * 2) // 3, limit // 3
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}"


def _check(req: Any) -> None:
    if req.mode not in MODES:
        raise ValueError(f"unknown request mode {req.mode!r} (one of {', '.join(MODES)})")
    if req.mode != "new" and not req.attempts:
        raise ValueError(f"a {req.mode!r} request needs the attempt to fix in its attempts")


def _common(req: Any) -> dict[str, str]:
    return {"task_description": req.task_description.strip(), "hardware": req.hardware.strip() or "unknown",
            "reference_source": req.reference_source.strip()}


def render_chat(req: Any) -> tuple[str, str]:
    """The (system, user) messages for a Request."""
    _check(req)
    system = fill("system")
    if req.mode == "new":
        examples = "".join(fill("example", n=i, source=s.strip()) for i, s in enumerate(req.examples, 1))
        attempts = "".join(fill("attempt", n=i, source=a.source.strip(), verdict_summary=trim(a.verdict_summary))
                           for i, a in enumerate(req.attempts[:MAX_ATTEMPTS], 1))
        return system, fill("new", **_common(req), examples=examples, attempts=attempts)
    *earlier, last = req.attempts
    earlier = earlier[-MAX_HISTORY:]
    history = ""
    if earlier:
        items = "".join(fill("history_item", n=i, verdict_summary=trim(a.verdict_summary))
                        for i, a in enumerate(earlier, 1))
        history = fill("history", items=items)
    return system, fill(req.mode, **_common(req), history=history, source=last.source.strip(),
                        verdict_summary=trim(last.verdict_summary))


def render_agent(req: Any, timeout: float) -> dict[str, str]:
    """The files of an agent's workspace, by relative path."""
    _check(req)
    files = {"reference.py": req.reference_source}
    for i, src in enumerate(req.examples, 1):
        files[f"examples/{i:02d}.py"] = src
    for i, a in enumerate(req.attempts, 1):
        files[f"attempts/{i:02d}.py"] = a.source
        files[f"attempts/{i:02d}.verdict.txt"] = a.verdict_summary.rstrip() + "\n"
    n = len(req.attempts)
    files["task.md"] = fill(f"agent_{req.mode}", task_description=req.task_description.strip(),
                            hardware=req.hardware.strip() or "unknown",
                            last=f"attempts/{n:02d}.py", last_verdict=f"attempts/{n:02d}.verdict.txt")
    files["INSTRUCTIONS.md"] = fill("agent", timeout=f"{timeout:g}")
    return files
