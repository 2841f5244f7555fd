"""Budgets of one optimization run, and what has been spent."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Budget:
    candidates: int = 16
    seconds: float = 600.0
    tokens: int | None = None
    usd: float | None = None
    device_seconds: float | None = None
    roofline_stop: float | None = 0.9  # stop early once a candidate reaches this roofline fraction


@dataclass
class Spent:
    candidates: int = 0
    tokens: int = 0
    usd: float = 0.0
    device_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def exhausted(self, b: Budget) -> str | None:
        """Why the run must stop, or None."""
        if self.candidates >= b.candidates:
            return f"candidate budget ({b.candidates}) spent"
        if self.seconds >= b.seconds:
            return f"time budget ({b.seconds:.0f} s) spent"
        if b.tokens is not None and self.tokens >= b.tokens:
            return f"token budget ({b.tokens}) spent"
        if b.usd is not None and self.usd >= b.usd:
            return f"money budget (${b.usd:.2f}) spent"
        if b.device_seconds is not None and self.device_seconds >= b.device_seconds:
            return f"device-time budget ({b.device_seconds:.0f} s) spent"
        return None

    def left(self, b: Budget) -> str:
        """What is left of each set budget, for the progress line."""
        parts = [f"{max(0, b.candidates - self.candidates)} candidates", f"{max(0.0, b.seconds - self.seconds):.0f} s"]
        if b.tokens is not None:
            parts.append(f"{max(0, b.tokens - self.tokens)} tokens")
        if b.usd is not None:
            parts.append(f"${max(0.0, b.usd - self.usd):.2f}")
        if b.device_seconds is not None:
            parts.append(f"{max(0.0, b.device_seconds - self.device_seconds):.0f} device s")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, float]:
        return {"candidates": self.candidates, "seconds": round(self.seconds, 1), "tokens": self.tokens,
                "usd": round(self.usd, 4), "device_seconds": round(self.device_seconds, 1)}
