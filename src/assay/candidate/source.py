"""A candidate: source text, language, entry point; its id is a content hash.

The source is only *parsed* here (``ast``), never executed: the evaluator's process must
not run untrusted code.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from assay.errors import CandidateError

LABELS = {
    "triton": "custom kernel",
    "cuda": "custom kernel",
    "cpp": "custom kernel",
    "torch": "existing primitive",
}


@dataclass(frozen=True)
class Candidate:
    path: str
    source: str
    language: str  # triton | cuda | cpp | torch
    entry: str  # the name the worker calls: ModelNew or the task's entry function

    @property
    def id(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return LABELS[self.language]

    def describe(self) -> dict[str, str]:
        return {"path": self.path, "id": self.id, "language": self.language, "label": self.label,
                "entry": self.entry}


def detect_language(tree: ast.AST, source: str) -> str:
    decorators = {ast.unparse(d) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for d in n.decorator_list}
    if any("triton.jit" in d or d in ("jit", "triton.autotune") or "autotune" in d for d in decorators):
        return "triton"
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for c in calls:
        name = ast.unparse(c.func)
        if name.endswith("load_inline") or name.endswith("cpp_extension.load"):
            kws = {k.arg for k in c.keywords}
            if "cuda_sources" in kws or len(c.args) >= 3:
                return "cuda"
            return "cpp"
    return "torch"


def read_source(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file():
        raise CandidateError("no such candidate file", str(p))
    try:
        return p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CandidateError(f"cannot read: {e}", str(p)) from None


def _parse(path: str | Path, source: str) -> ast.Module:
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise CandidateError(f"syntax error at line {e.lineno}: {e.msg}", str(path)) from None


def source_language(path: str | Path, source: str) -> str:
    """The language of a candidate's source, before its entry point is known."""
    return detect_language(_parse(path, source), source)


def load_candidate(path: str | Path, entry: str, source: str | None = None) -> Candidate:
    """The candidate at ``path``; ``source``, when given, is its text as already read (it is
    not read again, so what was scanned, hashed and staged is one and the same text)."""
    p = Path(path)
    if source is None:
        source = read_source(p)
    tree = _parse(p, source)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    names |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    if entry not in names and "ModelNew" not in names:
        raise CandidateError(f"defines neither `{entry}` nor `ModelNew` (the entry point)", str(p))
    chosen = entry if entry in names else "ModelNew"
    return Candidate(str(p), source, detect_language(tree, source), chosen)
