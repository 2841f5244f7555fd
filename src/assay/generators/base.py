"""The generator interface of ``assay optimize``: a Request in, a Proposal out.

A generator is anything with a ``name`` and ``propose(req) -> Proposal``: an LLM behind an
API (``assay.generators.llm``), a coding agent run as a command (``assay.generators.agent``),
or the offline template generator (``assay.generators.builtin``). The search loop reads the
Request's fields by name only, so any object with the same attributes is accepted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from assay.errors import AssayError

Mode = Literal["new", "debug", "repair"]
MODES: tuple[str, ...] = ("new", "debug", "repair")


@dataclass(frozen=True)
class Attempt:
    """What a generator is told about a previous try."""

    source: str
    # compile errors (trimmed), the minimal failing case, integrity findings, timing per shape
    verdict_summary: str


@dataclass(frozen=True)
class Request:
    task_description: str
    reference_source: str  # the task file's text (a native task or a KernelBench problem)
    hardware: str  # e.g. "NVIDIA H200 (sm_90, 141 GB HBM3e)"
    examples: list[str] = field(default_factory=list)  # sources of known-good kernels to imitate
    attempts: list[Attempt] = field(default_factory=list)  # new: best first; debug/repair: the one to fix last
    mode: Mode = "new"  # new: write a kernel; debug: fix a wrong result; repair: fix a build failure
    # the run's entry (seq) this request builds on, shown as attempts[0] in "new" mode (drawn from
    # the measured beam) and as the last attempt in debug/repair mode; None: no measured parent yet
    parent: int | None = None


@dataclass(frozen=True)
class Proposal:
    source: str | None  # None when the response had no code block
    generator: str  # the generator's name, e.g. "openai:gpt-4.1"
    model: str
    prompt_hash: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    raw: str = ""  # the model's whole reply (an agent's output tail)


@runtime_checkable
class Generator(Protocol):
    name: str

    def propose(self, req: Request) -> Proposal: ...


class GeneratorError(AssayError):
    """A generator could not produce a reply: the service kept failing, or refused the request."""


def prompt_hash(*parts: str) -> str:
    """A short stable id of a prompt (its parts, in order)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
