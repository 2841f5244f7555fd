"""Import a user's Python file as a fresh module, turning every failure into one line."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType

from assay.errors import UserError


def one_line(text: str, limit: int = 500) -> str:
    """A message as one line (errors are printed as exactly one line)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def import_file(path: Path, error: type[UserError]) -> ModuleType:
    if not path.is_file():
        raise error("no such file", str(path))
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"cannot read: {e}", str(path)) from None
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        where = f" at line {e.lineno}" if e.lineno else ""
        raise error(one_line(f"syntax error{where}: {e.msg}"), str(path)) from None
    name = f"assay_user_{uuid.uuid4().hex[:12]}"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except UserError as e:
        raise type(e)(one_line(e.message), str(path)) from None
    except (Exception, SystemExit) as e:  # the user's file raised (or called sys.exit) while loading
        detail = one_line(str(e))
        raise error(f"raised {type(e).__name__} while loading" + (f": {detail}" if detail else ""),
                    str(path)) from None
    finally:
        sys.modules.pop(name, None)
    return module
