"""The environment record: what a verdict was measured on."""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=2)
def environment(device: str = "cpu") -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": device,
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device == "cuda" and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, sm_count=p.multi_processor_count, gpu_memory_gb=round(p.total_memory / 2**30, 1),
                   capability=f"{p.major}.{p.minor}", driver=_driver())
    else:
        env["cpu"] = platform.processor() or platform.machine()
    return env


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None
