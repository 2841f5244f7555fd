"""The candidate code in a model's reply: the last Python fenced block that defines something.

Blocks are fenced with three or more backticks; a block counts when its info string is
``python``/``py``/``python3`` or empty (a ``cuda``/``cpp``/``bash`` block is not a candidate:
CUDA reaches assay inside a Python module through ``load_inline``). Of those, a block that
defines ``class ModelNew`` (or the given entry function) wins over one that only defines some
function, and the last such block wins. Reasoning in ``<think>...</think>`` is skipped, and
so is an unclosed block (a reply cut off by the token limit). Nothing found: None.
"""

from __future__ import annotations

import re

PYTHON_TAGS = {"", "python", "py", "python3"}
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_OPEN = re.compile(r"^[ \t]{0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_MODEL_NEW = re.compile(r"^class[ \t]+ModelNew\b", re.MULTILINE)
_ANY_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(", re.MULTILINE)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info tag, body) of each closed fenced block, in order."""
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).lower()
        close = re.compile(rf"^[ \t]{{0,3}}`{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if j == len(lines):  # unclosed: the reply was cut off
            break
        blocks.append((tag, "\n".join(lines[i + 1:j])))
        i = j + 1
    return blocks


def extract_code(text: str, entry: str | None = None) -> str | None:
    """The candidate module in a reply, or None."""
    text = _THINK.sub("", text)
    blocks = [body for tag, body in fenced_blocks(text) if tag in PYTHON_TAGS and body.strip()]
    entry_def = re.compile(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\(", re.MULTILINE) if entry else None
    best = [b for b in blocks if _MODEL_NEW.search(b) or (entry_def is not None and entry_def.search(b))]
    some = best or [b for b in blocks if _ANY_DEF.search(b)]
    if not some:
        return None
    return some[-1].strip("\n") + "\n"
