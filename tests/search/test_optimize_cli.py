"""`assay optimize` end to end on CPU, as a real subprocess, with a script acting as the agent."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("option,value", [("--jobs", "0"), ("--device-budget", "-1"), ("--token-budget", "-5"),
                                          ("--roofline-stop", "-0.5")])
def test_optimize_rejects_a_bad_count_or_budget(tmp_path, option, value):
    (tmp_path / "task.py").write_text(TASK)
    env = {**os.environ, "ASSAY_DB": f"sqlite:///{tmp_path}/db.sqlite", "ASSAY_CACHE_DIR": str(tmp_path / "c")}
    r = subprocess.run([sys.executable, "-m", "assay.cli", "optimize", "task.py", option, value, "--device", "cpu"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and option in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_optimize_killed_with_sigkill_resumes_losing_only_the_candidate_in_flight(tmp_path):
    """`assay optimize` is killed (SIGKILL, its whole process group) while the agent writes its
    second candidate; the agent dies with it; `--resume RUN` keeps every stored verdict,
    evaluates nothing twice and finishes the budget."""
    import signal
    import time

    from assay.store.db import Store
    from assay.store.runs import RunStore

    (tmp_path / "task.py").write_text(TASK)
    state = tmp_path / "agent_state"
    state.mkdir()
    (state / "hang").write_text("")
    db = f"sqlite:///{tmp_path}/db.sqlite"
    env = {**os.environ, "ASSAY_DB": db, "ASSAY_CACHE_DIR": str(tmp_path / "c")}
    agent = f'agent:{sys.executable} {HERE / "agent_counted.py"} {state}'
    cmd = [sys.executable, "-m", "assay.cli", "optimize", "--generator", agent, "--budget", "3",
           "--device", "cpu", "--check-budget", "2", "--baseline", "eager", "--out", "best.py", "--json"]
    p = subprocess.Popen([*cmd[:4], "task.py", *cmd[4:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 420
    while not (state / "running").exists():
        assert p.poll() is None, p.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "the agent's second call never started"
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    p.stdout.close()
    p.stderr.close()
    assert p.returncode == -signal.SIGKILL
    # the agent (started in a session of its own) does not outlive the search: its leash ends it
    agent_pid = int((state / "running").read_text())
    gone = time.monotonic() + 10
    while _alive(agent_pid):
        assert time.monotonic() < gone, "the agent outlived the killed search"
        time.sleep(0.1)

    runs = RunStore(Store(db))
    run_id = 1
    assert runs.run(run_id) is not None
    before = [(r.seq, r.generator, r.source_hash) for r in runs.candidates(run_id)]
    agent_before = [b for b in before if b[1].startswith("agent")]
    assert len(agent_before) == 1  # the first candidate was committed; the one in flight is lost
    assert any(b[1] == "library:eager" for b in before)

    (state / "hang").unlink()
    r = subprocess.run(cmd[:4] + ["--resume", str(run_id)] + cmd[4:], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    assert summary["run_id"] == run_id
    assert summary["budget_spent"]["candidates"] == 3
    after = [(row.seq, row.generator, row.source_hash) for row in runs.candidates(run_id)]
    assert after[: len(before)] == before  # nothing stored before the kill was lost or rewritten
    assert len([a for a in after if a[1].startswith("agent")]) == 3
    assert len({a[2] for a in after}) == len(after)  # nothing evaluated twice (the baseline neither)
    # the live progress lines: candidates done, the best so far against the best baseline, what is left
    assert "3/3 candidates" in r.stderr and "left: 0 candidates" in r.stderr
    assert "best not slower than a baseline: " in r.stderr and "best baseline #" in r.stderr
