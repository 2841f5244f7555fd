"""Evaluator subprocesses: ``check`` for several candidates at once, one process each.

``check`` is not safe to run in threads of one process (torch global state, dispatch modes),
so with ``--jobs N`` the Supervisor starts each evaluation as ``python -m
assay.search.evaluator JOB.json``: a fresh trusted evaluator process that loads the task from
its file (its sha256 must match), runs ``check`` (which starts its own untrusted worker, as
always) and writes the verdict JSON to ``JOB.out.json`` (atomically). The Supervisor's
process only reads the typed ``Verdict`` back and commits it to the store, in arrival order.

A subprocess that dies, hangs past its timeout or leaves no parsable verdict is reported as a
rejected verdict with a ``robustness`` reason (its log tail as evidence): one crash costs
one candidate, never the run. Each result carries the wall-clock interval in which its
``check`` ran (``start``/``end``, ``time.time()``) and the evaluator's pid.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.config import CheckConfig
from assay.sandbox.process import die_with_parent
from assay.verdict import Category, Finding, StageResult, Status, Verdict, decide

COMMAND: tuple[str, ...] = (sys.executable, "-m", "assay.search.evaluator")


@dataclass
class Job:
    key: int  # unique within one Supervisor session
    candidate: Path
    task_path: str
    task_sha256: str
    config: CheckConfig
    phase: str  # "untimed" (correctness, integrity) | "timed" (the full check, device held exclusively)
    payload: Any = None  # the caller's own bookkeeping, returned untouched


@dataclass
class Result:
    job: Job
    verdict: Verdict
    start: float  # time.time() when check started in the evaluator (its launch when it never reported)
    end: float
    pid: int | None
    crashed: str | None = None  # why no verdict came back, when none did
    info: dict[str, Any] = field(default_factory=dict)

    def phase_record(self) -> dict[str, Any]:
        return {"phase": self.job.phase, "start": self.start, "end": self.end, "pid": self.pid,
                **({"crashed": self.crashed} if self.crashed else {})}


def job_timeout(cfg: CheckConfig) -> float:
    """Generous wall limit of one evaluator process: build, cases, integrity and timing, with slack."""
    return cfg.build_timeout + 4 * (cfg.time_budget + cfg.case_timeout) + (900.0 if cfg.timing else 120.0)


def crash_verdict(job: Job, why: str, log_tail: str = "") -> Verdict:
    finding = Finding(category=Category.robustness, message=f"the evaluator process {why}", rejects=True,
                      evidence={"phase": job.phase, "log_tail": log_tail[-2000:]})
    stages = [StageResult(name="evaluator", status=Status.failed, findings=[finding])]
    accepted, reasons = decide(stages)
    return Verdict(accepted=accepted, reasons=reasons, task={"path": job.task_path, "hash": job.task_sha256},
                   candidate={"path": str(job.candidate)}, device=job.config.device, stages=stages)


class EvaluatorPool:
    """Evaluator subprocesses, at most as many as the caller submits; results in arrival order."""

    def __init__(self, workdir: Path, command: tuple[str, ...] | list[str] | None = None,
                 timeout: float | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.command = list(command or COMMAND)
        self.timeout = timeout
        self._done: queue.Queue[Result] = queue.Queue()
        self.running = 0

    def submit(self, job: Job) -> None:
        base = self.workdir / f"job_{job.key:04d}_{job.phase}"
        out = base.with_suffix(".out.json")
        out.unlink(missing_ok=True)
        spec = {"candidate": str(job.candidate), "task": job.task_path, "task_sha256": job.task_sha256,
                "config": job.config.model_dump(mode="json", exclude={"secret"}),
                "secret": job.config.secret.hex() if job.config.secret else None, "out": str(out)}
        base.with_suffix(".json").write_text(json.dumps(spec))
        log = open(base.with_suffix(".log"), "wb")
        launched = time.time()
        try:
            # an evaluator process dies with the search (and its workers with it)
            proc = subprocess.Popen([*self.command, str(base.with_suffix(".json"))], stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
        except OSError as e:
            log.close()
            self._done.put(Result(job, crash_verdict(job, f"could not start: {e}"), launched, time.time(), None,
                                  crashed=str(e)))
            self.running += 1
            return
        self.running += 1
        limit = self.timeout if self.timeout is not None else job_timeout(job.config)
        threading.Thread(target=self._wait, args=(job, proc, log, out, launched, limit), daemon=True).start()

    def next(self) -> Result:
        """The next result to arrive (blocks); call only while ``running``."""
        r = self._done.get()
        self.running -= 1
        return r

    def _wait(self, job: Job, proc: subprocess.Popen[bytes], log: Any, out: Path, launched: float,
              limit: float) -> None:
        why = None
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            why = f"did not finish within {limit:.0f} s and was killed"
        finally:
            log.close()
        try:
            data = json.loads(out.read_text())
            verdict = Verdict.model_validate(data["verdict"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            tail = _tail(Path(log.name))
            why = why or (f"died (exit status {rc})" if rc else f"exited without a verdict ({type(e).__name__})")
            self._done.put(Result(job, crash_verdict(job, why, tail), launched, time.time(), proc.pid, crashed=why))
            return
        self._done.put(Result(job, verdict, float(data["start"]), float(data["end"]), int(data["pid"])))


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


def _watch_parent() -> None:
    """Exit when the Supervisor's process is gone (e.g. ``kill -9``): no orphaned evaluations."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    _watch_parent()
    from assay.evaluate import check
    from assay.task import load_task

    text = Path(spec["task"]).read_bytes()
    if hashlib.sha256(text).hexdigest() != spec["task_sha256"]:
        print(f"task file {spec['task']} changed since the run started", file=sys.stderr)
        return 2
    cfg = CheckConfig(**{**spec["config"], "secret": bytes.fromhex(spec["secret"]) if spec["secret"] else None})
    start = time.time()
    verdict = check(spec["candidate"], load_task(spec["task"]), config=cfg)
    end = time.time()
    out = Path(spec["out"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"verdict": json.loads(verdict.model_dump_json()), "start": start, "end": end,
                               "pid": os.getpid()}))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
