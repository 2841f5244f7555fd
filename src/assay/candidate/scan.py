"""Static scan: known cheat and escape patterns in the source, each pointing at its line.

Findings are supporting evidence (the runtime gates decide); none rejects on its own.
"""

from __future__ import annotations

import re

from assay.verdict import Category, Finding

PATTERNS: list[tuple[str, Category, str]] = [
    (r"\binspect\b|sys\._getframe|\bf_locals\b|\bf_back\b|\bf_globals\b|gc\.get_objects",
     Category.security, "frame or heap introspection (reading the evaluator)"),
    (r"\bctypes\b|\bcffi\b", Category.security, "ctypes/cffi: raw memory or libc access"),
    (r"os\.environ|os\.getenv|\bgetenv\(", Category.security, "environment access"),
    (r"\bsocket\b|urllib|\brequests\b|http\.client|\bhttpx\b", Category.security, "network access"),
    (r"\bsubprocess\b|os\.system|os\.popen|os\.fork|os\.exec", Category.security, "starts processes"),
    (r"\bthreading\b|concurrent\.futures|multiprocessing", Category.integrity, "threads or processes (work escaping timing)"),
    (r"cuda\.Stream\(|torch\.cuda\.stream\(|cudaStreamCreate|ExternalStream", Category.integrity, "side stream"),
    (r"^\s*(torch|time|triton|builtins|np|numpy)(\.\w+)+\s*=[^=]", Category.integrity, "monkey-patches a library attribute"),
    (r"setattr\(\s*(torch|time|triton|builtins)", Category.integrity, "monkey-patches a library attribute"),
    (r"^\s*except\b", Category.integrity, "try/except (a fallback around the kernel?)"),
    (r"functools\.(lru_)?cache|@cache\b|_cache\s*=\s*\{\}", Category.integrity, "result caching"),
    (r"cudaStreamAttributeAccessPolicyWindow|persisting", Category.integrity, "L2 persistence control"),
]
_COMPILED = [(re.compile(p, re.M), c, m) for p, c, m in PATTERNS]


def scan(source: str) -> list[Finding]:
    findings: list[Finding] = []
    for lineno, line in enumerate(source.splitlines(), start=1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith(("'", '"')) else line
        for rx, cat, msg in _COMPILED:
            if rx.search(code):
                findings.append(Finding(category=cat, message=f"line {lineno}: {msg}: {line.strip()[:100]}",
                                        line=lineno, rejects=False))
    return findings
