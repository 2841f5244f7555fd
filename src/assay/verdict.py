"""The verdict: one typed, versioned result for one evaluation of one candidate.

Every consumer (CLI, store, reports, search) reads this type and nothing else. Stages
append a ``StageResult``; the overall decision is ``accepted`` plus ``reasons``, each
with a ``Category``. ``Verdict.model_dump_json()`` is the JSON contract of
``assay check --json``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1


class Category(str, Enum):
    """Why a candidate was rejected (or what a finding is about)."""

    build = "build"
    correctness = "correctness"
    integrity = "integrity"
    metadata = "metadata"
    robustness = "robustness"
    security = "security"
    performance = "performance"


class Status(str, Enum):
    passed = "passed"
    failed = "failed"
    skipped = "skipped"  # stage not run (an earlier stage failed, or not requested)
    warning = "warning"  # ran, found something worth reporting, did not reject


class Finding(BaseModel):
    """One observation of a stage: a static-scan hit, a failing case, a gate's evidence."""

    category: Category
    message: str
    rejects: bool = False  # whether this finding alone rejects the candidate
    line: int | None = None  # source line, for static findings
    evidence: dict[str, Any] = Field(default_factory=dict)


class StageResult(BaseModel):
    name: str  # build | static_scan | correctness | integrity | timing | ...
    status: Status
    seconds: float = 0.0
    findings: list[Finding] = Field(default_factory=list)
    evidence: dict[str, Any] = Field(default_factory=dict)


    def settle(self) -> "StageResult":
        """Status from the findings: failed if any rejects, warning if any other, else as is."""
        if any(f.rejects for f in self.findings):
            self.status = Status.failed
        elif self.findings and self.status is Status.passed:
            self.status = Status.warning
        return self


class Reason(BaseModel):
    category: Category
    message: str


class Verdict(BaseModel):
    schema_version: int = SCHEMA_VERSION
    accepted: bool
    reasons: list[Reason] = Field(default_factory=list)
    task: dict[str, Any] = Field(default_factory=dict)  # name, path, hash, kind
    candidate: dict[str, Any] = Field(default_factory=dict)  # path, hash, language, label
    device: str = "cpu"
    stages: list[StageResult] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    seconds: float = 0.0

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def categories(self) -> set[Category]:
        return {r.category for r in self.reasons}


def decide(stages: list[StageResult]) -> tuple[bool, list[Reason]]:
    """Overall decision: rejected iff any stage failed; reasons are the rejecting findings."""
    reasons: list[Reason] = []
    for stage in stages:
        for f in stage.findings:
            if f.rejects:
                reasons.append(Reason(category=f.category, message=f.message))
        if stage.status is Status.failed and not any(f.rejects for f in stage.findings):
            reasons.append(Reason(category=Category.robustness, message=f"stage {stage.name} failed"))
    accepted = not any(s.status is Status.failed for s in stages)
    return accepted, reasons
