"""One typed configuration for an evaluation (CLI flags and the Python API both fill it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


def default_cache_dir() -> Path:
    root = os.environ.get("ASSAY_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                              os.path.expanduser("~/.cache"), "assay")
    return Path(root)


def default_db_url() -> str:
    if os.environ.get("ASSAY_DB"):
        return os.environ["ASSAY_DB"]
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return f"sqlite:///{Path(data) / 'assay' / 'assay.db'}"


def known_baseline(name: str) -> bool:
    """A baseline name assay can build: eager, compile, or compile:MODE (torch.compile's mode)."""
    return name in ("eager", "compile") or name.startswith("compile:")


class CheckConfig(BaseModel):
    device: Literal["cpu", "cuda"] = "cpu"
    time_budget: float = Field(30.0, gt=0, description="seconds for the correctness cases")
    case_timeout: float = Field(60.0, gt=0, description="seconds one call may take before the worker is killed")
    build_timeout: float = Field(600.0, gt=0, description="seconds for import + compilation")
    require_custom_kernel: bool = True  # plain torch / library fallbacks are rejected unless allowed
    timing: bool = True
    # baselines timed against the candidate (None: the device's default: eager, torch.compile default and
    # max-autotune-no-cudagraphs on cuda; eager on cpu)
    baselines: tuple[str, ...] | None = None
    profile: bool = False  # the profile stage (ncu speed-of-light metrics, bottleneck class) for a passing candidate
    # named gates to switch off: only for showing, in tests, that a gate is what catches a cheat
    gates_off: frozenset[str] = frozenset()
    cache_dir: Path = Field(default_factory=default_cache_dir)
    secret: bytes | None = None  # per-evaluation secret; random when None
    replay: str | None = None  # a case token from a verdict: run only that case

    @classmethod
    def for_device(cls, device: str | None, **kw: object) -> "CheckConfig":
        if device is None:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        return cls(device=device, **kw)  # type: ignore[arg-type]
