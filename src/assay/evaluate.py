"""The evaluator pipeline for one candidate: static scan -> build (in a worker) -> correctness.

Each stage returns a ``StageResult``; stages after a failed one are ``skipped``. This module
imports no CLI, store, UI or LLM code.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from pathlib import Path
from typing import Callable

import torch

from assay.candidate.scan import scan
from assay.candidate.source import Candidate, load_candidate
from assay.config import CheckConfig
from assay.measure.environment import environment
from assay.sandbox.process import Worker, WorkerDied
from assay.task import load_task
from assay.task.spec import Task
from assay.verdict import Category, Finding, StageResult, Status, Verdict, decide
from assay.verify.cases import Case
from assay.verify.gauntlet import run_gauntlet


def check(candidate: str | Path | Candidate, task: str | Path | Task, config: CheckConfig | None = None,
          log: Callable[[str], None] | None = None, **overrides: object) -> Verdict:
    """Run the gauntlet for one candidate against one task and return its verdict."""
    cfg = config or CheckConfig.for_device(overrides.pop("device", None), **overrides)  # type: ignore[arg-type]
    t0 = time.monotonic()
    t = task if isinstance(task, Task) else load_task(task)
    cand = candidate if isinstance(candidate, Candidate) else load_candidate(candidate, t.entry_name)
    replay = Case.from_token(cfg.replay) if cfg.replay else None
    # start the worker now: its interpreter and torch import overlap with the static scan
    worker = Worker(device=cfg.device, cache_dir=cfg.cache_dir, extra_env=_build_env(cand, cfg))
    worker.start()
    stages: list[StageResult] = []

    findings = scan(cand.source)
    stages.append(StageResult(name="static_scan", status=Status.warning if findings else Status.passed,
                              findings=findings))
    try:
        build = _build(cand, t, worker, cfg)
        stages.append(build)
        if build.status is Status.passed:
            secret = cfg.secret or secrets.token_bytes(16)
            stages.append(run_gauntlet(t, worker, cfg.device, secret, cfg.time_budget, cfg.case_timeout,
                                       replay=replay, log=log, gates_off=cfg.gates_off))
            stages[-1].evidence["containment"] = {**worker.containment, "landlock": build.evidence.get("landlock")}
            stages += _later_stages(t, cand, worker, cfg, secret, replay is not None, stages[-1].status)
        else:
            stages.append(StageResult(name="correctness", status=Status.skipped))
    finally:
        worker.close()
    accepted, reasons = decide(stages)
    integ = next((s for s in stages if s.name == "integrity" and s.evidence.get("label")), None)
    cand_info = {**cand.describe(), **({"label": integ.evidence["label"]} if integ else {})}
    return Verdict(accepted=accepted, reasons=reasons, task={**t.describe(), "hash": _hash(t.source)},
                   candidate=cand_info, device=cfg.device, stages=stages,
                   environment=environment(cfg.device), seconds=time.monotonic() - t0)


def _later_stages(t: Task, cand: Candidate, worker: Worker, cfg: CheckConfig, secret: bytes, replaying: bool,
                  correctness: Status) -> list[StageResult]:
    """Integrity (what ran) and timing, for a candidate that computes the right function."""
    from assay.measure.stage import TimingConfig, run_timing
    from assay.verify.integrity import run_integrity

    if replaying or correctness is not Status.passed:
        return [StageResult(name="integrity", status=Status.skipped), StageResult(name="timing", status=Status.skipped)]
    integ = run_integrity(t, worker, cfg.device, secret, cand.language,
                          cfg.require_custom_kernel and "primitive" not in cfg.gates_off)
    if integ.status is Status.failed or not cfg.timing:
        return [integ, StageResult(name="timing", status=Status.skipped)]
    tcfg = TimingConfig.for_device(cfg.device, gates_off=cfg.gates_off)
    timing = run_timing(t, worker, cfg.device, secret, tcfg, cache_dir=cfg.cache_dir)
    return [integ, timing]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_key(cand: Candidate, device: str) -> str:
    """Builds are cached by content hash + toolchain + target."""
    tool = f"{torch.__version__}|{torch.version.cuda}|{device}"
    return hashlib.sha256(f"{cand.source}\0{tool}".encode()).hexdigest()[:20]


def _build_env(cand: Candidate, cfg: CheckConfig) -> dict[str, str]:
    ext = cfg.cache_dir / "torch_extensions" / build_key(cand, cfg.device)
    env = {"TORCH_EXTENSIONS_DIR": str(ext)}
    if cand.language == "triton":
        env["ASSAY_PREIMPORT"] = "triton"
    return env


def _build(cand: Candidate, task: Task, worker: Worker, cfg: CheckConfig) -> StageResult:
    ext_dir = Path(_build_env(cand, cfg)["TORCH_EXTENSIONS_DIR"])  # created here, used by the worker
    cached = ext_dir.is_dir() and any(ext_dir.rglob("*.so"))
    ext_dir.mkdir(parents=True, exist_ok=True)
    (cfg.cache_dir / "triton").mkdir(parents=True, exist_ok=True)
    staged = worker.stage_file(Path(cand.path))
    t0 = time.monotonic()
    req = {"op": "load", "path": str(staged), "entry": cand.entry, "fallback_entry": "ModelNew", "device": cfg.device}
    try:
        resp = worker.request(req, cfg.build_timeout)
    except WorkerDied as e:
        cat = Category.build if e.kind == "timeout" else Category.robustness
        return StageResult(name="build", status=Status.failed, seconds=time.monotonic() - t0, findings=[
            Finding(category=cat, rejects=True, message=f"import/build: {e.message}",
                    evidence={"output_tail": e.output[-2000:]})])
    ev = {"language": cand.language, "label": cand.label, "cache_key": build_key(cand, cfg.device),
          "cache_hit": cached}
    if resp.get("ok"):
        ev["import_s"] = resp.get("import_s")
        ev["landlock"] = resp.get("landlock")
        return StageResult(name="build", status=Status.passed, seconds=time.monotonic() - t0, evidence=ev)
    phase = resp.get("phase")
    error = str(resp.get("error", ""))
    cat = Category.build if phase in ("build", "import") else Category.robustness
    if phase == "entry":
        cat = Category.build
    msg = trim_compiler_output(error) if phase == "build" else error.splitlines()[0][:300] if error else "failed"
    ev["traceback"] = resp.get("traceback", "")[-3000:]
    return StageResult(name="build", status=Status.failed, seconds=time.monotonic() - t0, evidence=ev, findings=[
        Finding(category=cat, rejects=True, message=f"{phase} failed: {msg}")])


_ERR = re.compile(r"error|Error|undefined reference|fatal", re.I)


def trim_compiler_output(text: str, context: int = 2, limit: int = 25) -> str:
    """Keep the compiler's error lines (with a little context); drop the build-command noise."""
    lines = text.splitlines()
    keep: list[int] = []
    for i, line in enumerate(lines):
        if _ERR.search(line) and not line.lstrip().startswith(("[", "c++ ", "g++ ", "/usr/")):
            keep += range(i, min(len(lines), i + context + 1))
    picked = sorted(set(keep))[:limit] or list(range(min(limit, len(lines))))
    return "\n".join(lines[i][:240] for i in picked)
