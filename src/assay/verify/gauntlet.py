"""The correctness gauntlet: run the case plan through the worker, compare, find the minimal failure."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from assay.sandbox.process import Worker, WorkerDied
from assay.task.spec import Task, parse_dtype
from assay.verdict import Category, Finding, StageResult, Status
from assay.verify import compare as cmp
from assay.verify.cases import SIMPLICITY, Budget, Case, Plan, iter_shrinks, plan_cases
from assay.verify.inputs import make_inputs
from assay.verify.reference import RefResult, ReferenceError_, run_reference

MIN_CASES = 12  # run at least this many (and every workload) even past the time budget
MAX_FAILURES = 6  # after this many failing cases, stop exploring and minimise
MIN_RANDOM = 4  # random cases run even past the random budget (when the plan has them)
# Seconds for the random cases, which follow the structured ones (workloads, boundary sizes,
# layouts, value classes, specials, largest sizes: those always run), per device. On the CPU a
# Triton kernel runs interpreted (~5 ms per program instance), so random shapes get a budget of
# their own; elsewhere (None) only the stage's time budget bounds them.
RANDOM_BUDGET: dict[str, float | None] = {"cpu": 0.5, "cuda": None}


@dataclass
class Outcome:
    case: Case
    status: str  # pass | fail | skip
    category: Category | None = None
    message: str = ""
    max_abs_err: float = 0.0
    norm_err: float = 0.0
    where: str = ""
    outputs_meta: list[dict[str, Any]] = field(default_factory=list)
    threads_left: int = 0

    @property
    def numel(self) -> int:
        return math.prod(self.case.dims.values()) if self.case.dims else 1

    def finding(self, minimal: bool = False) -> Finding:
        c = self.case
        ev = {"case": c.token(), "kind": c.kind, "dims": c.dims, "dtype": c.dtype, "values": c.values,
              "layouts": list(c.layouts), "seed": c.seed, "max_abs_err": self.max_abs_err,
              "norm_err": self.norm_err, "where": self.where}
        head = "minimal failing case" if minimal else "failing case"
        dims = ", ".join(f"{k}={v}" for k, v in c.dims.items())
        msg = f"{head} [{c.dtype}; {dims}; {c.values}; {'+'.join(c.layouts)}]: {self.message}"
        if self.where:
            msg += f" ({self.where})"
        return Finding(category=self.category or Category.correctness, message=msg, rejects=True, evidence=ev)


class CandidateCrashed(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


@dataclass
class _Prepared:
    """A case ready to send: its inputs and the reference's outputs (or why the reference skips it)."""

    case: Case
    inputs: list[Any]
    ref: RefResult | None = None
    skip: str = ""
    tols: list[cmp.Tolerance | None] = field(default_factory=list)  # per output: computed from the reference only


def _prepare(task: Task, case: Case, device: str) -> _Prepared:
    inputs = make_inputs(task, case)
    try:
        ref = run_reference(task, case, inputs, device)
    except ReferenceError_ as e:
        return _Prepared(case, inputs, skip=f"reference rejects this case: {e}")
    tols = [_tolerance(task, rd.dtype, r64, rd) if isinstance(rd, torch.Tensor) and isinstance(r64, torch.Tensor)
            else None for r64, rd in zip(ref.out64, ref.out_d)]
    return _Prepared(case, inputs, ref, tols=tols)


def _run_request(p: _Prepared, gates_off: frozenset[str]) -> dict[str, Any]:
    assert p.ref is not None
    stability = p.case.kind in ("workload", "repeat") or p.case.seed % 8 == 0
    stability = stability and "stability" not in gates_off
    return {"op": "run", "init": p.ref.init, "inputs": p.inputs, "stability": stability,
            "poison": "poison" not in gates_off}


def _finish(task: Task, p: _Prepared, resp: dict[str, Any], worker: Worker, device: str,
            gates_off: frozenset[str]) -> Outcome:
    assert p.ref is not None
    case = p.case
    if not resp.get("ok"):
        cat = Category.build if resp.get("build") else Category.robustness
        if resp.get("cuda_error"):
            worker.kill()  # CUDA errors are sticky: this process is finished
        f = Finding(category=cat, rejects=True,
                    message=f"candidate raised on case [{case.key()}]: {resp.get('error', '?')}",
                    evidence={"case": case.token(), "traceback": resp.get("traceback", "")})
        raise CandidateCrashed(f)
    return judge(task, case, p.ref.out64, p.ref.out_d, resp, device, gates_off=gates_off, ref_tuple=p.ref.is_tuple,
                 tols=p.tols)


def run_case(task: Task, case: Case, worker: Worker, device: str, timeout: float,
             gates_off: frozenset[str] = frozenset()) -> Outcome:
    p = _prepare(task, case, device)
    if p.skip:
        return Outcome(case, "skip", message=p.skip)
    try:
        resp = worker.request(_run_request(p, gates_off), timeout)
    except WorkerDied as e:
        raise CandidateCrashed(_died(e, case)) from None
    return _finish(task, p, resp, worker, device, gates_off)


def judge(task: Task, case: Case, out64: list[Any], out_d: list[Any], resp: dict[str, Any], device: str,
          ref_tuple: bool | None = None, gates_off: frozenset[str] = frozenset(),
          tols: list[cmp.Tolerance | None] | None = None) -> Outcome:
    """Metadata, integrity and values of one case. ``gates_off`` disables named gates (only to
    show, in tests, that a gate is what catches a cheat): norm, mutation, alias, exact_type, stability.
    ``tols``: the tolerance per output when already computed (it depends on the reference only)."""
    outs, meta = resp.get("outputs") or [], resp.get("meta") or []
    o = Outcome(case, "pass", outputs_meta=meta)
    if ref_tuple is not None and bool(resp.get("tuple")) != ref_tuple:
        got, want = ("a tuple", "a single tensor") if resp.get("tuple") else ("a single tensor", "a tuple")
        return _fail(o, Category.metadata, f"returned {got}, the reference returns {want}")
    if len(outs) != len(out64) or len(meta) != len(outs):
        return _fail(o, Category.metadata, f"returned {len(outs)} outputs, the reference returns {len(out64)}")
    o.threads_left = int(resp.get("threads_delta") or 0)
    if resp.get("changed_after_return") and "stability" not in gates_off:
        return _fail(o, Category.integrity, f"output(s) {resp['changed_after_return']} changed after the call "
                     "returned (work escaping on a side stream or a background thread)")
    mutated = resp.get("mutated") or []
    if mutated and not task.mutates_inputs and "mutation" not in gates_off:
        return _fail(o, Category.integrity, f"mutated input(s) {mutated}, which the contract forbids")
    for i, (got, m, r64, rd) in enumerate(zip(outs, meta, out64, out_d)):
        if not isinstance(rd, torch.Tensor):
            continue
        if (not m.get("exact") or got is None) and "exact_type" not in gates_off:
            return _fail(o, Category.integrity, f"output {i} is a {m.get('type')}, not a plain torch.Tensor")
        if m.get("aliases") and not task.mutates_inputs and "alias" not in gates_off:
            return _fail(o, Category.integrity, f"output {i} shares storage with input(s) {m['aliases']}")
        if list(got.shape) != list(rd.shape):
            return _fail(o, Category.metadata, f"output {i} has shape {list(got.shape)}, expected {list(rd.shape)}")
        if got.dtype != rd.dtype:
            return _fail(o, Category.metadata, f"output {i} has dtype {got.dtype}, expected {rd.dtype}")
        if m.get("device") != device:
            return _fail(o, Category.metadata, f"output {i} is on {m.get('device')}, expected {device}")
        tol = (tols[i] if tols and i < len(tols) else None) or _tolerance(task, rd.dtype, r64, rd)
        c = cmp.compare(got, r64, tol, norm="norm" not in gates_off)
        o.max_abs_err = max(o.max_abs_err, c.max_abs_err)
        o.norm_err = max(o.norm_err, c.norm_err)
        if not c.ok:
            o.where = c.where
            return _fail(o, Category.correctness, f"output {i}: {c.message}; max abs error {c.max_abs_err:.3g}")
    return o


def _tolerance(task: Task, dtype: torch.dtype, r64: torch.Tensor, rd: torch.Tensor) -> cmp.Tolerance:
    if isinstance(task.tolerance, dict):
        name = str(dtype).removeprefix("torch.")
        if name in task.tolerance:
            atol, rtol = task.tolerance[name]
            return cmp.fixed(dtype, float(atol), float(rtol))
    return cmp.calibrate(dtype, r64, rd)


def _fail(o: Outcome, cat: Category, msg: str) -> Outcome:
    o.status, o.category, o.message = "fail", cat, msg
    return o


def _died(e: WorkerDied, case: Case) -> Finding:
    what = {"timeout": "hung", "crash": "crashed", "protocol": "broke the worker protocol"}.get(e.kind, e.kind)
    return Finding(category=Category.robustness, rejects=True,
                   message=f"candidate {what} on case [{case.key()}]: {e.message}",
                   evidence={"case": case.token(), "output_tail": e.output[-2000:]})


def run_gauntlet(task: Task, worker: Worker, device: str, secret: bytes, time_budget: float,
                 case_timeout: float, replay: Case | None = None,
                 log: Callable[[str], None] | None = None, budget: Budget | None = None,
                 gates_off: frozenset[str] = frozenset(), random_budget: float | None = None,
                 while_waiting: Callable[[], object] | None = None) -> StageResult:
    """Run the plan. ``time_budget`` bounds the whole stage (past it, only workloads and the first
    MIN_CASES run); ``random_budget`` (None: no bound of its own) bounds the random cases that
    follow the structured ones (workloads, boundary sizes, layouts, value classes, specials,
    largest sizes), which always run first and are never cut by it.

    The evaluator's share of a case (inputs and the fp64 reference) is prepared for the next case
    while the worker runs the current one; the worker still gets one request at a time.
    ``while_waiting`` (the evaluator's own work for later stages) runs once, while the worker
    runs the first case."""
    t0 = time.monotonic()
    plan = Plan([replay]) if replay else plan_cases(task, device, secret, budget)
    if log:
        log(f"case plan ({len(plan.cases)} cases, budget {time_budget:.0f} s):")
        for line in plan.describe():
            log("  " + line)
        for n in plan.notes:
            log("  note: " + n)
    outcomes: list[Outcome] = []
    stage = StageResult(name="correctness", status=Status.passed)
    try:
        cases = plan.cases
        nxt = _prepare(task, cases[0], device) if cases else None
        random_t0, n_random = 0.0, 0
        for i, case in enumerate(cases):
            p, nxt = nxt, None
            assert p is not None and p.case is case
            now = time.monotonic()
            if now - t0 > time_budget and len(outcomes) >= MIN_CASES and case.kind != "workload":
                break
            if case.kind == "random" and random_budget is not None:
                random_t0 = random_t0 or now
                if n_random >= MIN_RANDOM and now - random_t0 > random_budget:
                    break
                n_random += 1
            if p.skip:
                out = Outcome(case, "skip", message=p.skip)
                nxt = _prepare(task, cases[i + 1], device) if i + 1 < len(cases) else None
            else:
                try:
                    deadline = worker.send(_run_request(p, gates_off), case_timeout)
                    # the next case's inputs and reference are computed while the worker runs this one
                    nxt = _prepare(task, cases[i + 1], device) if i + 1 < len(cases) else None
                    if while_waiting is not None:
                        while_waiting, job = None, while_waiting
                        job()
                    resp = worker.receive(deadline)
                except WorkerDied as e:
                    raise CandidateCrashed(_died(e, case)) from None
                out = _finish(task, p, resp, worker, device, gates_off)
            outcomes.append(out)
            if log:
                log(f"  {out.status:4s} {case.key()} {out.message}")
            if sum(o.status == "fail" for o in outcomes) >= MAX_FAILURES:
                break
        failures = [o for o in outcomes if o.status == "fail"]
        if failures:
            # an integrity violation (output changed after return, mutated input, ...) explains the
            # wrong values seen on other cases: it is the reason reported, not their minimal case
            integrity = [o for o in failures if o.category is Category.integrity]
            best = _minimise(task, integrity or failures, worker, device, case_timeout,
                             deadline=time.monotonic() + max(5.0, time_budget / 3), gates_off=gates_off)
            stage.status = Status.failed
            finding = best.finding(minimal=True)
            if best.category is Category.correctness and not _reproduces(task, best.case, worker, device,
                                                                        case_timeout, gates_off):
                # still a rejection (a wrong answer now and then is a wrong answer), but the user
                # should know: a race, uninitialised memory, or the platform (docs/measurements.md)
                finding = finding.model_copy(update={
                    "message": finding.message + "; it did not reproduce on a re-run with the same inputs "
                    "(nondeterministic)", "evidence": {**finding.evidence, "reproduced": False}})
            stage.findings.append(finding)
            kinds = {(o.category, o.message.split(":")[0]) for o in failures if o is not best}
            for o in failures[:3]:
                if o is not best and (o.category, o.message.split(":")[0]) in kinds:
                    stage.findings.append(o.finding().model_copy(update={"rejects": False}))
    except CandidateCrashed as e:
        stage.status = Status.failed
        stage.findings.append(e.finding)
    stage.seconds = time.monotonic() - t0
    stage.evidence = {
        "planned": len(plan.cases),
        "ran": len(outcomes),
        "passed": sum(o.status == "pass" for o in outcomes),
        "failed": sum(o.status == "fail" for o in outcomes),
        "skipped_by_reference": sum(o.status == "skip" for o in outcomes),
        "kinds": sorted({o.case.kind for o in outcomes}),
        "random_ran": sum(o.case.kind == "random" for o in outcomes),
        "notes": plan.notes,
        "max_abs_err": max((o.max_abs_err for o in outcomes), default=0.0),
        "max_norm_err": max((o.norm_err for o in outcomes), default=0.0),
        "threads_left_running": max((o.threads_left for o in outcomes), default=0),
        "output_strides": [m.get("stride") for m in (outcomes[0].outputs_meta if outcomes else [])],
    }
    return stage


def _reproduces(task: Task, case: Case, worker: Worker, device: str, timeout: float,
                gates_off: frozenset[str]) -> bool:
    """Whether ``case`` fails again when run once more with the same inputs (a crash counts)."""
    try:
        return run_case(task, case, worker, device, timeout, gates_off).status == "fail"
    except CandidateCrashed:
        return True


def _minimise(task: Task, failures: list[Outcome], worker: Worker, device: str, timeout: float,
              deadline: float, gates_off: frozenset[str] = frozenset()) -> Outcome:
    """The smallest shape and simplest value class that still fails (bounded search)."""
    best = min(failures, key=lambda o: (o.numel, SIMPLICITY.get(o.case.values, 9)))
    if best.case.values != "normal" and best.category is Category.correctness:
        trial = run_case(task, _with(best.case, values="normal"), worker, device, timeout, gates_off)
        if trial.status == "fail":
            best = trial
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for smaller in iter_shrinks(task, best.case):
            if time.monotonic() > deadline:
                break
            trial = run_case(task, smaller, worker, device, timeout, gates_off)
            if trial.status == "fail" and trial.category == best.category:
                best, improved = trial, True
                break
    return best


def _with(case: Case, **kw: Any) -> Case:
    from dataclasses import replace

    return replace(case, **kw)


__all__ = ["run_gauntlet", "run_case", "Outcome", "parse_dtype"]
