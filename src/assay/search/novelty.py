"""Novelty filter: no budget on candidates that are the same program as one already tried."""

from __future__ import annotations

import difflib
import hashlib
import io
import tokenize


def normalized(source: str) -> str:
    """The source without comments, docstrings-as-comments, blank lines or spacing differences."""
    out: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                continue
            out.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(source.split())
    return " ".join(out)


def source_hash(source: str) -> str:
    return hashlib.sha256(normalized(source).encode()).hexdigest()[:16]


class NoveltyFilter:
    def __init__(self, threshold: float = 0.98) -> None:
        self.threshold = threshold
        self.seen: dict[str, str] = {}

    def check(self, source: str, near: bool = True) -> str | None:
        """None if novel (and remember it); else why it is a duplicate. ``near=False`` (debug
        and repair rounds, whose fixes are small edits by design) rejects exact repeats only."""
        h = source_hash(source)
        if h in self.seen:
            return "identical to a candidate already tried (normalized source)"
        norm = normalized(source)
        for other in self.seen.values() if near else ():
            if difflib.SequenceMatcher(None, norm, other, autojunk=False).quick_ratio() >= self.threshold and \
                    difflib.SequenceMatcher(None, norm, other, autojunk=False).ratio() >= self.threshold:
                return f"near-duplicate (similarity >= {self.threshold})"
        self.seen[h] = norm
        return None
