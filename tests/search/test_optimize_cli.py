"""`assay optimize` end to end on CPU, as a real subprocess, with a script acting as the agent."""

import json
import os
import subprocess
import sys
from pathlib import Path

from test_loop import TASK

HERE = Path(__file__).parent


def test_optimize_with_an_agent_returns_the_baseline_when_nothing_beats_it(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    env = {**os.environ, "ASSAY_DB": f"sqlite:///{tmp_path}/db.sqlite", "ASSAY_CACHE_DIR": str(tmp_path / "c"),
           "OPENAI_API_KEY": "sk-must-not-reach-the-agent"}
    agent = f'agent:{sys.executable} {HERE / "agent_writes_kernel.py"}'
    r = subprocess.run([sys.executable, "-m", "assay.cli", "optimize", "task.py", "--generator", agent,
                        "--budget", "1", "--device", "cpu", "--check-budget", "3", "--out", "best.py", "--json"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    # the interpreted Triton kernel is correct but slower than eager on the CPU: the answer is a baseline
    assert summary["beat_baselines"] is False and summary["answer"].startswith("library:")
    assert summary["budget_spent"]["candidates"] == 1
    best = (tmp_path / "best.py").read_text()
    report = (tmp_path / "best.report.md").read_text()
    assert "Nothing beat the best baseline" in report and "## Performance against each baseline" in report
    # the written answer is a file `assay check` accepts
    c = subprocess.run([sys.executable, "-m", "assay.cli", "check", "best.py", "--task", "task.py", "--device",
                        "cpu", "--allow-primitive", "--no-timing", "--no-store", "--time-budget", "2"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "scale" in best


def test_optimize_rejects_a_bad_jobs_count(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    env = {**os.environ, "ASSAY_DB": f"sqlite:///{tmp_path}/db.sqlite", "ASSAY_CACHE_DIR": str(tmp_path / "c")}
    r = subprocess.run([sys.executable, "-m", "assay.cli", "optimize", "task.py", "--jobs", "0", "--device", "cpu"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "--jobs" in r.stderr, r.stderr
