import re
import sys
import time
from pathlib import Path

import pytest

from assay.generators.agent import AgentGenerator, scrubbed_env
from assay.generators.base import Attempt, Request

AGENT = Path(__file__).parent / "agents" / "fake_agent.py"
REF = "import torch\n\n\ndef softmax(x):\n    return torch.softmax(x, dim=-1)\n"


def cmd(mode: str) -> str:
    return f'"{sys.executable}" "{AGENT}" {mode}'


def req(mode="new", attempts=()):
    return Request("Row softmax over the last dimension.", REF, "NVIDIA H200", [], list(attempts), mode)


def test_agent_writes_candidate(tmp_path):
    gen = AgentGenerator(cmd("write"), timeout=30, workspace_root=tmp_path)
    p = gen.propose(req("debug", [Attempt("def softmax(x):\n    return x\n", "wrong result on x (M=1, N=3)")]))
    expected = ("# task: Row softmax over the last dimension.\n# attempts seen: 1\n"
                + REF.replace("torch.softmax(x, dim=-1)", "my_softmax(x)"))
    assert p.source == expected
    assert p.generator.startswith("agent:python")
    assert p.model == gen.command and (p.tokens_in, p.tokens_out, p.cost_usd) == (0, 0, 0.0)
    assert "wrote candidate.py" in p.raw and "[agent exited 0]" in p.raw
    assert list(tmp_path.iterdir()) == []  # the workspace is removed


def test_agent_workspace_kept_on_request(tmp_path):
    gen = AgentGenerator(cmd("write"), timeout=30, workspace_root=tmp_path, keep_workspace=True)
    gen.propose(req())
    ws = gen.last_workspace
    assert ws is not None and ws.parent == tmp_path
    assert {p.name for p in ws.iterdir()} >= {"task.md", "reference.py", "INSTRUCTIONS.md", "candidate.py"}
    assert (ws / "reference.py").read_text() == REF


def test_agent_past_timeout_is_killed(tmp_path):
    gen = AgentGenerator(cmd("sleep"), timeout=1.0, workspace_root=tmp_path)
    t0 = time.monotonic()
    p = gen.propose(req())
    assert time.monotonic() - t0 < 10
    assert p.source is None and gen.last_timed_out
    assert "timed out" in p.raw and "thinking..." in p.raw


def test_agent_file_left_by_a_timed_out_run(tmp_path):
    p = AgentGenerator(cmd("write-then-hang"), timeout=1.0, workspace_root=tmp_path).propose(req())
    assert p.source is None
    p = AgentGenerator(cmd("write-then-hang"), timeout=1.0, workspace_root=tmp_path,
                       accept_on_timeout=True).propose(req())
    assert p.source == "def softmax(x):\n    return x\n"


def test_agent_without_candidate(tmp_path):
    p = AgentGenerator(cmd("nothing"), timeout=30, workspace_root=tmp_path).propose(req())
    assert p.source is None and "[agent exited 3]" in p.raw


def test_agent_environment_has_no_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-parent")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_x")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("aws_secret_access_key", "x")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/x.json")
    monkeypatch.setenv("ASSAY_HARMLESS", "1")
    p = AgentGenerator(cmd("env"), timeout=30, workspace_root=tmp_path).propose(req())
    ns: dict = {}
    exec(p.source, ns)
    env = set(ns["ENV"])
    assert not env & {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD",
                      "aws_secret_access_key", "GOOGLE_APPLICATION_CREDENTIALS"}
    assert {"ASSAY_HARMLESS", "PATH"} <= env


def test_agent_pass_env_is_explicit(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent")
    monkeypatch.setenv("AGENT_API_KEY", "agent-own")
    p = AgentGenerator(cmd("env"), timeout=30, workspace_root=tmp_path, pass_env=["AGENT_API_KEY"]).propose(req())
    ns: dict = {}
    exec(p.source, ns)
    assert "AGENT_API_KEY" in ns["ENV"] and "OPENAI_API_KEY" not in ns["ENV"]


def test_scrubbed_env():
    env = {"PATH": "/bin", "HF_TOKEN": "x", "MY_KEYRING": "y", "HOME": "/root"}
    assert scrubbed_env(env) == {"PATH": "/bin", "HOME": "/root"}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return not re.search(r"^State:\s+Z", state, re.MULTILINE)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_agent_leaves_no_process_behind(tmp_path):
    p = AgentGenerator(cmd("orphan"), timeout=30, workspace_root=tmp_path).propose(req())
    assert p.source is not None
    pid = int(re.search(r"child (\d+)", p.raw).group(1))
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
