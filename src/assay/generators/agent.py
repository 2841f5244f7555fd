"""A coding agent as a generator: a shell command run in a prepared workspace.

The workspace (a fresh temporary directory per proposal) holds ``task.md``,
``reference.py`` (the task file), ``INSTRUCTIONS.md``, ``examples/NN.py`` and
``attempts/NN.py`` + ``attempts/NN.verdict.txt``. The command runs there with
``shell=True``, in its own process group, with an environment from which every variable
whose name contains KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL is removed (unless
named in ``pass_env``), and stdin closed. When it exits, the whole group is killed (nothing
it started outlives it); past ``timeout`` seconds the group gets SIGTERM, then SIGKILL.

The proposal is the ``candidate.py`` it leaves. None when there is none, or it is empty,
or the run timed out (a killed agent's file may be half written), unless
``accept_on_timeout``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from assay.generators.base import Proposal, prompt_hash
from assay.generators.prompts import render_agent

LEASH = Path(__file__).with_name("leash.py")

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
OUTPUT_LIMIT = 64_000  # characters of the agent's output kept in Proposal.raw (the tail)
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL


def scrubbed_env(env: Mapping[str, str] | None = None, keep: Iterable[str] = ()) -> dict[str, str]:
    """``env`` (default os.environ) without the variables that look like credentials."""
    keep = set(keep)
    src = os.environ if env is None else env
    return {k: v for k, v in src.items()
            if k in keep or not any(m in k.upper() for m in SECRET_MARKERS)}


class AgentGenerator:
    def __init__(self, command: str, timeout: float = 1800.0, *, workspace_root: str | os.PathLike | None = None,
                 keep_workspace: bool = False, accept_on_timeout: bool = False,
                 pass_env: Iterable[str] = ()) -> None:
        if not command.strip():
            raise ValueError("an agent needs a command")
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        self.command, self.timeout = command, float(timeout)
        self.workspace_root = workspace_root
        self.keep_workspace, self.accept_on_timeout = keep_workspace, accept_on_timeout
        self.pass_env = tuple(pass_env)
        try:
            prog = shlex.split(command)[0]
        except (ValueError, IndexError):
            prog = command.split()[0]
        self.name = f"agent:{os.path.basename(prog)}"
        self.last_workspace: Path | None = None  # kept only with keep_workspace
        self.last_timed_out = False
        self.last_returncode: int | None = None

    def prepare(self, req: Any, workspace: Path) -> dict[str, str]:
        files = render_agent(req, self.timeout)
        for rel, text in files.items():
            p = workspace / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        return files

    def propose(self, req: Any) -> Proposal:
        root = None if self.workspace_root is None else str(self.workspace_root)
        ws = Path(tempfile.mkdtemp(prefix="assay-agent-", dir=root))
        try:
            files = self.prepare(req, ws)
            phash = prompt_hash(self.command, *(f"{k}\n{v}" for k, v in sorted(files.items())))
            output, timed_out, rc = self._run(ws)
            self.last_timed_out, self.last_returncode = timed_out, rc
            cand = ws / "candidate.py"
            source = None
            if cand.is_file() and (not timed_out or self.accept_on_timeout):
                text = cand.read_text(encoding="utf-8", errors="replace")
                source = text if text.strip() else None
            status = f"[agent timed out after {self.timeout:g} s]" if timed_out else f"[agent exited {rc}]"
            return Proposal(source=source, generator=self.name, model=self.command, prompt_hash=phash,
                            raw=f"{output}\n{status}\n")
        finally:
            if self.keep_workspace:
                self.last_workspace = ws
            else:
                shutil.rmtree(ws, ignore_errors=True)

    def _run(self, ws: Path) -> tuple[str, bool, int | None]:
        log = ws.parent / f"{ws.name}.log" if not self.keep_workspace else ws / "agent.log"
        with open(log, "w+b") as out:
            # through the leash: the agent and its children die with this process, even by SIGKILL
            proc = subprocess.Popen([sys.executable, "-I", str(LEASH), str(os.getpid()), self.command], cwd=ws,
                                    env=scrubbed_env(keep=self.pass_env), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            timed_out = False
            try:
                rc: int | None = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout=TERM_GRACE)
                except subprocess.TimeoutExpired:
                    pass
                rc = None
            _kill_group(proc, signal.SIGKILL)  # whatever it started goes with it
            if proc.poll() is None:
                proc.wait()
            out.seek(0)
            data = out.read()
        if log.parent != ws:
            log.unlink(missing_ok=True)
        text = data.decode("utf-8", errors="replace")
        return text[-OUTPUT_LIMIT:], timed_out, rc

    def __repr__(self) -> str:
        return f"AgentGenerator({self.command!r}, timeout={self.timeout:g})"


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the shell's pid
    except (ProcessLookupError, PermissionError):
        pass
