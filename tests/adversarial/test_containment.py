"""Containment, end to end through ``check``: hostile candidates cannot see secrets, write outside
their directory, reach the network, take the host down with processes or output, or lose the
record of what happened. Each probe answers relu(x) when it was contained and relu(x) + 1 when it
got through, so the verdict itself says which (accepted = contained).

Probes that need a path or a port are templates in ``candidates/`` filled in per test.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from assay.evaluate import check
from assay.sandbox import process
from assay.store.db import Store
from assay.verdict import Category, Status, Verdict

HERE = Path(__file__).parent
CANDIDATES = HERE / "candidates"
TASKS = HERE / "tasks"
BUDGET = 2.0


def run(candidate: str | Path, task: str = "relu", **kw: object) -> Verdict:
    kw.setdefault("require_custom_kernel", False)
    kw.setdefault("timing", False)
    kw.setdefault("time_budget", BUDGET)
    kw.setdefault("case_timeout", 10)
    path = candidate if isinstance(candidate, Path) else CANDIDATES / f"{candidate}.py"
    return check(path, TASKS / f"{task}.py", device="cpu", **kw)


def why(v: Verdict) -> list[tuple[str, str]]:
    return [(r.category.value, r.message) for r in v.reasons]


def contained(v: Verdict) -> None:
    """The probe answered relu(x) on every case: it saw / reached / wrote nothing."""
    assert v.accepted, f"the probe got through (or failed): {why(v)}"


def from_template(tmp_path: Path, name: str, **fill: str) -> Path:
    src = (CANDIDATES / f"{name}.py").read_text()
    for key, value in fill.items():
        src = src.replace(f"__{key}__", value)
    out = tmp_path / f"{name}.py"
    out.write_text(src)
    return out


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"probe_{uuid.uuid4().hex}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- secrets ------------------------------------------------------------------------------------------------
SECRETS = {"OPENAI_API_KEY": "sk-assay-canary-openai-0123", "ANTHROPIC_API_KEY": "sk-ant-assay-canary-4567"}


def test_candidate_sees_no_api_keys(monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    # the probe works: run in the evaluator's own process, it finds the keys at once
    probe = _import(CANDIDATES / "relu_env_probe.py")
    assert probe.seen_secret()
    # /proc/<pid>/environ shows a process's environment at exec time (monkeypatch's putenv does not
    # show there): a host process started with the keys stands in for an evaluator launched with them
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, **SECRETS})
    try:
        v = run("relu_env_probe")
    finally:
        holder.kill()
        holder.wait()
    contained(v)
    corr = v.stage("correctness")
    assert corr.evidence["passed"] >= 12  # the probe ran on every case
    assert corr.evidence["containment"]["env"] == "allow-list"
    assert any("environment access" in f.message for f in v.stage("static_scan").findings)


# -- filesystem ---------------------------------------------------------------------------------------------
def test_write_outside_the_worker_directory_fails(tmp_path):
    tag = uuid.uuid4().hex
    targets = [f"/tmp/assay_escape_{tag}", str(tmp_path / f"assay_escape_{tag}"),
               f"/dev/shm/assay_escape_{tag}", str(Path.cwd() / f"assay_escape_{tag}")]
    cand = from_template(tmp_path, "relu_write_escape", TARGETS=repr(targets))
    # the probe works: outside the sandbox the first write succeeds
    assert _import(cand).escaped()
    os.remove(targets[0])
    try:
        v = run(cand)
        contained(v)
        for t in targets:
            assert not os.path.exists(t), f"the candidate created {t}"
        landlock = v.stage("correctness").evidence["containment"]["landlock"]
        assert landlock.startswith("landlock ABI"), landlock
    finally:
        for t in targets:
            if os.path.exists(t):
                os.remove(t)


# -- network ------------------------------------------------------------------------------------------------
def test_connect_to_a_local_server_fails(tmp_path):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    try:
        cand = from_template(tmp_path, "relu_connect_localhost", PORT=str(port))
        # the probe works: from the evaluator's process it connects
        assert _import(cand).connected()
        while True:  # drain the probe's own connections
            try:
                server.accept()[0].close()
            except socket.timeout:
                break
        v = run(cand)
        contained(v)
        with pytest.raises(socket.timeout):
            server.accept()  # nothing from the worker ever arrived
        assert v.stage("correctness").evidence["containment"]["network"].startswith(("network namespace",
                                                                                      "python socket guard"))
    finally:
        server.close()


# -- processes ----------------------------------------------------------------------------------------------
def _alive_with_comm(name: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if comm == name and state != "Z":
            found.append(int(d))
    return found


def test_fork_bomb_is_rejected_within_the_timeout_and_leaves_nothing(tmp_path):
    tag = "ab" + uuid.uuid4().hex[:12]  # a process name (at most 15 characters)
    cand = from_template(tmp_path, "relu_fork_bomb", TAG=tag)
    t0 = time.monotonic()
    try:
        v = run(cand, case_timeout=5)
        elapsed = time.monotonic() - t0
        assert not v.accepted
        assert v.categories == {Category.robustness}, why(v)
        assert "hung" in v.reasons[0].message or "crashed" in v.reasons[0].message, why(v)
        assert elapsed < 25, elapsed
        deadline = time.monotonic() + 5
        while _alive_with_comm(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive_with_comm(tag) == [], "fork-bomb processes outlived the worker"
    finally:
        for pid in _alive_with_comm(tag):  # never leave our own bomb behind
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
    good = run("relu_torch")
    assert good.accepted, why(good)


# -- stdio ---------------------------------------------------------------------------------------------------
def test_closing_stdout_and_stderr_still_gives_a_verdict():
    v = run("relu_close_stdio")
    assert v.accepted, why(v)  # the protocol does not use fds 1 and 2: a correct relu is accepted
    assert v.stage("correctness").evidence["passed"] >= 12


def test_closing_the_protocol_pipes_is_a_robustness_failure():
    v = run("relu_close_protocol")
    assert not v.accepted
    assert v.categories == {Category.robustness}, why(v)
    good = run("relu_torch")
    assert good.accepted, why(good)


def test_flooding_stdout_is_stopped_by_the_file_size_limit():
    """~3 GiB to stdout: the worker's output file stops at RLIMIT_FSIZE (2 GiB); CPython ignores
    SIGXFSZ, so the write fails with EFBIG and the candidate is rejected as raising."""
    assert process.Limits().fsize_bytes == 2 << 30
    t0 = time.monotonic()
    v = run("relu_flood_stdout", case_timeout=25)
    assert time.monotonic() - t0 < 30
    assert not v.accepted
    assert v.categories == {Category.robustness}, why(v)
    assert "File too large" in v.reasons[0].message or "hung" in v.reasons[0].message, why(v)
    # the evaluator keeps only a tail of what the worker printed
    for f in v.stage("correctness").findings:
        assert len(str(f.evidence)) < 10_000


# -- the store --------------------------------------------------------------------------------------------------
def test_store_keeps_every_verdict_of_a_sequence_with_a_crasher(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'assay.db'}")
    task_src = (TASKS / "relu.py").read_text()
    sequence = ["relu_torch", "relu_segfault", "relu_torch"]
    ids = []
    for name in sequence:
        v = run(name, case_timeout=5)
        ids.append(store.record(v, task_src, (CANDIDATES / f"{name}.py").read_text()))
    rows = list(reversed(store.history(limit=10)))
    assert [r["id"] for r in rows] == ids
    assert [r["accepted"] for r in rows] == [True, False, True]
    assert rows[1]["categories"] == "robustness"
    back = store.verdict(ids[1])
    assert back is not None and not back.accepted
    assert "SIGSEGV" in back.reasons[0].message
    assert back.stage("correctness").status is Status.failed
    # the database is a plain file any later process can read
    again = Store(f"sqlite:///{tmp_path / 'assay.db'}")
    assert len(again.history(limit=10)) == 3

