"""The evaluator pipeline for one candidate: static scan -> build (in a worker) -> correctness.

Each stage returns a ``StageResult``; stages after a failed one are ``skipped``. This module
imports no CLI, store, UI or LLM code.

Start-up order matters for wall time (docs/measurements.md): the worker is started before
this process imports torch, so the two imports (and the worker's triton import) run side by
side; this module therefore imports torch and the torch-using modules inside ``check``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import secrets
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from assay.candidate.source import Candidate, load_candidate, read_source, source_language
from assay.config import CheckConfig
from assay.sandbox.process import Worker, WorkerDied
from assay.verdict import Category, Finding, StageResult, Status, Verdict, decide

if TYPE_CHECKING:
    from assay.task.spec import Task


def check(candidate: str | Path | Candidate, task: "str | Path | Task", config: CheckConfig | None = None,
          log: Callable[[str], None] | None = None, while_waiting: Callable[[], object] | None = None,
          **overrides: object) -> Verdict:
    """Run the gauntlet for one candidate against one task and return its verdict.

    ``while_waiting``: the caller's own work (the CLI opens its store), run once while the worker
    runs the first correctness case, when this process would otherwise wait idle; not run when
    the check ends before that. An exception it raises ends the check."""
    cfg = config or CheckConfig.for_device(overrides.pop("device", None), **overrides)  # type: ignore[arg-type]
    t0 = time.monotonic()
    if isinstance(candidate, Candidate):
        path, source, language = candidate.path, candidate.source, candidate.language
    else:
        path = str(candidate)
        source = read_source(path)
        language = source_language(path, source)
    # start the worker first: its interpreter, torch and triton imports overlap with this
    # process's own imports, the task load and the static scan
    worker = Worker(device=cfg.device, cache_dir=cfg.cache_dir, extra_env=_env_for(source, language, cfg))
    worker.start()
    try:
        return _check(candidate, path, source, task, worker, cfg, log, t0, while_waiting)
    finally:
        worker.close()


def _check(candidate: str | Path | Candidate, path: str, source: str, task: "str | Path | Task", worker: Worker,
           cfg: CheckConfig, log: Callable[[str], None] | None, t0: float,
           while_waiting: Callable[[], object] | None = None) -> Verdict:
    from assay.candidate.scan import scan
    from assay.measure.environment import environment
    from assay.task import load_task
    from assay.task.spec import Task
    from assay.verify.cases import Case
    from assay.verify.gauntlet import RANDOM_BUDGET, run_gauntlet

    t = task if isinstance(task, Task) else load_task(task)
    cand = candidate if isinstance(candidate, Candidate) else load_candidate(path, t.entry_name, source=source)
    replay = Case.from_token(cfg.replay) if cfg.replay else None
    stages: list[StageResult] = []

    findings = scan(cand.source)
    stages.append(StageResult(name="static_scan", status=Status.warning if findings else Status.passed,
                              findings=findings))
    build = _build(cand, t, worker, cfg)
    stages.append(build)
    if build.status is Status.passed:
        secret = cfg.secret or secrets.token_bytes(16)
        stages.append(run_gauntlet(t, worker, cfg.device, secret, cfg.time_budget, cfg.case_timeout,
                                   replay=replay, log=log, gates_off=cfg.gates_off,
                                   random_budget=RANDOM_BUDGET.get(cfg.device),
                                   while_waiting=lambda: _warm_later_stages(cfg, while_waiting)))
        stages[-1].evidence["containment"] = {**worker.containment, "landlock": build.evidence.get("landlock")}
        stages += _later_stages(t, cand, worker, cfg, secret, replay is not None, stages[-1].status)
    else:
        stages.append(StageResult(name="correctness", status=Status.skipped))
    worker.close()  # before the verdict is assembled: nothing more is asked of it
    if cfg.profile and all(s.status is not Status.failed for s in stages) and replay is None:
        from assay.measure.profile import run_profile

        prof = run_profile(t, cand.source, cand.entry, cfg.device, secret, cfg.cache_dir,
                           _env_for(source, cand.language, cfg))
        timed = next((s for s in stages if s.name == "timing" and s.status is Status.passed), None)
        if prof.status is not Status.passed and timed is not None and cfg.device == "cuda":
            from assay.measure.profile import roofline_bottleneck

            prof.evidence.update(roofline_bottleneck(timed.evidence))  # the class without ncu
        stages.append(prof)
    accepted, reasons = decide(stages)
    integ = next((s for s in stages if s.name == "integrity" and s.evidence.get("label")), None)
    cand_info = {**cand.describe(), **({"label": integ.evidence["label"]} if integ else {})}
    return Verdict(accepted=accepted, reasons=reasons, task={**t.describe(), "hash": _hash(t.source)},
                   candidate=cand_info, device=cfg.device, stages=stages,
                   environment=environment(cfg.device), seconds=time.monotonic() - t0)


# The timing stage's CPU settings (on top of TimingConfig.for_device's): an interpreted Triton call
# takes ~0.1 s on the CPU and no CPU speedup is a claim worth sampling to 0.5 % stderr; every round
# still re-checks the output and the clocks, and the stage's own minimum of rounds applies.
CPU_TIMING: dict[str, Any] = {"warmup": 1, "per_round": 1, "min_samples": 3, "max_time": 0.25}


def _warm_later_stages(cfg: CheckConfig, caller: Callable[[], object] | None) -> None:
    """Imports and the environment record the later stages need, made while the worker runs the
    first correctness case (this process would otherwise wait idle); then the caller's own work."""
    from assay.measure.environment import environment
    from assay.verify import integrity  # noqa: F401

    environment(cfg.device)  # cached: the verdict's record
    if cfg.timing:
        from assay.measure import stage  # noqa: F401
    if caller is not None:
        caller()


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
    chosen = {"baselines": cfg.baselines} if cfg.baselines else {}
    tcfg = TimingConfig.for_device(cfg.device, gates_off=cfg.gates_off, **chosen,
                                   **(CPU_TIMING if cfg.device == "cpu" else {}))
    timing = run_timing(t, worker, cfg.device, secret, tcfg, cache_dir=cfg.cache_dir)
    return [integ, timing]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def _toolchain() -> tuple[str, str | None]:
    """torch's version and CUDA version. Before this process has imported torch they are read
    from torch/version.py (plain constant assignments written when torch was built; parsed,
    not executed), so the worker can start while torch is still to be imported here."""
    if "torch" not in sys.modules:
        found = _read_torch_version()
        if found is not None:
            return found
    import torch

    return str(torch.__version__), torch.version.cuda


def _read_torch_version() -> tuple[str, str | None] | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    values: dict[str, Any] = {}
    try:
        path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):  # type: ignore[union-attr]
                values[target.id] = node.value.value  # type: ignore[union-attr]
    except (OSError, SyntaxError, StopIteration):
        return None
    if not isinstance(values.get("__version__"), str) or not isinstance(values.get("cuda"), (str, type(None))):
        return None
    return values["__version__"], values.get("cuda")


def build_key(cand: Candidate | str, device: str) -> str:
    """Builds are cached by content hash + toolchain + target (``cand``: a candidate or its source)."""
    version, cuda = _toolchain()
    tool = f"{version}|{cuda}|{device}"
    source = cand.source if isinstance(cand, Candidate) else cand
    return hashlib.sha256(f"{source}\0{tool}".encode()).hexdigest()[:20]


def _env_for(source: str, language: str, cfg: CheckConfig) -> dict[str, str]:
    ext = cfg.cache_dir / "torch_extensions" / build_key(source, cfg.device)
    env = {"TORCH_EXTENSIONS_DIR": str(ext)}
    # a Triton candidate's worker imports triton before the candidate (not counted as its build)
    if language == "triton":
        env["ASSAY_PREIMPORT"] = "triton"
    return env


def _build_env(cand: Candidate, cfg: CheckConfig) -> dict[str, str]:
    return _env_for(cand.source, cand.language, cfg)


def _build(cand: Candidate, task: Task, worker: Worker, cfg: CheckConfig) -> StageResult:
    ext_dir = Path(_build_env(cand, cfg)["TORCH_EXTENSIONS_DIR"])  # created here, used by the worker
    cached = ext_dir.is_dir() and any(ext_dir.rglob("*.so"))
    ext_dir.mkdir(parents=True, exist_ok=True)
    (cfg.cache_dir / "triton").mkdir(parents=True, exist_ok=True)
    staged = worker.stage_source(cand.source)
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
