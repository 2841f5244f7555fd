"""HOSTILE: looks for the evaluator's API keys: in its own environment, in /proc/1/environ, in
/proc/<ppid>/environ and in every /proc/<pid>/environ it can read. Answers relu(x) when it saw
nothing, and relu(x) + 1 (wrong, so the verdict says so) when it saw a secret."""

import os

import torch

NAMES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
CANARY = "assay-canary"


def seen_secret():
    if any(n in os.environ for n in NAMES) or any(CANARY in v for v in os.environ.values()):
        return True
    pids = ["1", str(os.getppid()), "self"] + [d for d in os.listdir("/proc") if d.isdigit()]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read().decode(errors="replace")
        except OSError:
            continue
        if CANARY in data or any(n + "=" in data for n in NAMES):
            return True
    return False


def relu(x):
    return torch.relu(x) + (1.0 if seen_secret() else 0.0)
