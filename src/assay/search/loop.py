"""The optimization loop: propose, check, keep the best, debug near-misses, verify held-out.

Order of a run:
1. library candidates (eager, torch.compile of the reference): the answer if nothing beats them;
2. rounds over the generators until a budget is spent (or a candidate reaches the roofline
   target): each proposal passes the novelty filter, then the full ``check``; a candidate that
   builds and runs but fails correctness gets debug rounds (fed its minimal failing case) until
   ``debug_rounds`` rounds no longer shrink its error, a compile failure gets repair rounds;
3. the best accepted candidate that is not slower than any baseline is re-checked on held-out
   shapes and seeds (never shown to a generator); the winner and an acceptance report are written.
Every verdict is committed to the store as it arrives; ``resume`` continues a run from there.

A new proposal's parent is drawn from the beam of measured entries (``search/parents.py``) and
shown first among its attempts; its seq is the entry's ``parent``. With ``jobs > 1`` up to
``jobs`` proposals are checked at once, each in its own evaluator process
(``search/evaluator.py``), without the timing stage; a candidate that passes is then checked
again in full, timing included, while no other evaluation runs (docs/architecture.md, "Search").
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from assay.config import CheckConfig
from assay.errors import AssayError, UserError
from assay.evaluate import check
from assay.generators.base import Attempt, Generator, Request
from assay.search.budget import Budget, Spent
from assay.search.evaluator import EvaluatorPool, Job, Result
from assay.search.feedback import error_size, score, slower_than_a_baseline, summarize
from assay.search.library import library_candidates
from assay.search.novelty import NoveltyFilter, source_hash
from assay.search.parents import ParentPolicy, ParentSelector
from assay.store.runs import RunStore
from assay.task.spec import Task, Workload
from assay.verdict import Category, Verdict


@dataclass
class Entry:
    seq: int
    source: str
    generator: str
    verdict: Verdict
    score: float | None
    mode: str = "new"
    parent: int | None = None  # seq of the entry it was made from: the beam's pick, or the one debugged
    island: str = ""  # the generator (by name) that proposed it: its sub-population
    # when and where its check ran: [{"phase", "start", "end", "pid"}], time.time() seconds
    phases: list[dict[str, Any]] = field(default_factory=list)

    @property
    def eligible(self) -> bool:
        """Accepted, timed, and (for a generated kernel) not slower than any baseline."""
        if not (self.verdict.accepted and self.score is not None):
            return False
        return self.generator.startswith("library:") or not slower_than_a_baseline(self.verdict)


@dataclass(frozen=True)
class SearchConfig:
    """How the search runs (the budgets are ``Budget``): parallel evaluations and parent selection."""

    jobs: int = 1  # proposals evaluated at once; >1: each in its own evaluator process, timing serialized
    parents: ParentPolicy = field(default_factory=ParentPolicy)
    eval_timeout: float | None = None  # wall limit of one evaluator process (None: from the check config)
    evaluator_command: tuple[str, ...] | None = None  # default: python -m assay.search.evaluator

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise UserError(f"--jobs must be at least 1, not {self.jobs}")


@dataclass
class Work:
    """A proposal to ask for: a new kernel, or a debug/repair round of an entry."""

    gen: Generator
    mode: str = "new"
    attempts: list[Attempt] | None = None  # None: a new proposal (parent and attempts chosen when asked)
    parent: int | None = None
    rounds_left: int | None = None
    last_err: float | None = None
    stale: int = 0


@dataclass
class Pending:
    """A proposal whose evaluation is under way."""

    work: Work
    proposal: Any
    source: str
    generator: str
    parent: int | None
    provenance: dict[str, Any]
    config: CheckConfig


@dataclass
class RunResult:
    run_id: int
    best: Entry | None
    baseline_best: Entry | None
    beat_baselines: bool
    held_out: Verdict | None
    entries: list[Entry] = field(default_factory=list)
    spent: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = ""


class Supervisor:
    def __init__(self, task: Task, generators: list[Generator], cfg: CheckConfig, budget: Budget,
                 runs: RunStore, run_id: int | None = None, debug_rounds: int = 3,
                 progress: Callable[[str], None] | None = None,
                 library: tuple[str, ...] | None = None, memory: Any = None,
                 search: SearchConfig | None = None) -> None:
        # torch.compile on the CPU spends tens of seconds compiling for a target that is not ours
        self.library = library or (("eager", "compile") if cfg.device == "cuda" else ("eager",))
        self.memory = memory
        self.search = search or SearchConfig()
        self.parents = ParentSelector(self.search.parents)
        self.hardware = _hardware(cfg)
        self.signature = ""
        self.examples: list[str] = []
        if memory is not None:
            from assay.knowledge.memory import op_signature

            self.signature = op_signature(task, cfg.device)
            self.examples = [r.source for r in memory.retrieve(self.signature, self.hardware)]
        self.task, self.generators, self.cfg, self.budget = task, generators, cfg, budget
        self.runs, self.debug_rounds, self.progress = runs, debug_rounds, progress or (lambda s: None)
        self.novelty = NoveltyFilter()
        self.spent = Spent()
        self.entries: list[Entry] = []
        self.pool: EvaluatorPool | None = None
        self._task_sha = ""
        if self.search.jobs > 1:
            if not task.path or not Path(task.path).is_file():
                raise UserError("--jobs > 1 needs a task loaded from a file (the evaluator processes load it)")
            self._task_sha = hashlib.sha256(Path(task.path).read_bytes()).hexdigest()
        self.run_id = run_id if run_id is not None else runs.new_run(
            task.path, hashlib.sha256(task.source.encode()).hexdigest()[:16],
            {"device": cfg.device, "budget": budget.__dict__, "generators": [g.name for g in generators],
             "jobs": self.search.jobs, "parents": asdict(self.search.parents)})
        self._resume()
        self._keys = itertools.count(len(self.entries))
        self._queue: deque[Work] = deque()  # debug/repair rounds waiting for a slot (before new proposals)
        self._arrived: deque[Result] = deque()  # jobs=1: checked in-process, waiting to be committed
        self._to_time: deque[Result] = deque()  # jobs>1: passed the untimed stages, waiting for the device
        self._next_gen = 0

    # -- bookkeeping ----------------------------------------------------------------
    def _resume(self) -> None:
        for row in self.runs.candidates(self.run_id):
            self.novelty.check(row.source)
            v = Verdict.model_validate(row.verdict)
            self.entries.append(Entry(row.seq, row.source, row.generator, v, row.score, row.mode, row.parent,
                                      str(row.provenance.get("island", "")), list(row.provenance.get("phases", []))))
            if not row.generator.startswith("library:"):
                self.spent.candidates += 1
            self.spent.tokens += int(row.provenance.get("tokens", 0))
            self.spent.usd += float(row.provenance.get("usd", 0.0))

    def _write_candidate(self, source: str) -> tuple[int, Path]:
        key = next(self._keys)
        path = Path(self.cfg.cache_dir) / "runs" / str(self.run_id) / f"cand_{key:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return key, path

    def _config(self, primitive_ok: bool) -> CheckConfig:
        custom = not primitive_ok and self.cfg.require_custom_kernel
        return self.cfg.model_copy(update={"require_custom_kernel": custom})

    def _check_here(self, job: Job) -> Result:
        """``check`` in this process (jobs=1, library baselines): nothing else runs meanwhile."""
        start = time.time()
        v = check(job.candidate, self.task, config=job.config)
        return Result(job, v, start, time.time(), os.getpid())

    def _commit(self, source: str, generator: str, mode: str, parent: int | None, provenance: dict[str, Any],
                v: Verdict, phases: list[dict[str, Any]]) -> Entry:
        """Store one verdict (the only place that writes candidates; always this process, in arrival order)."""
        self.spent.device_seconds += sum(p["end"] - p["start"] for p in phases) if phases else v.seconds
        island = str(provenance.get("island", ""))
        e = Entry(len(self.entries), source, generator, v, score(v), mode, parent, island, phases)
        self.runs.add_candidate(self.run_id, e.seq, source, source_hash(source), generator, parent, mode, v,
                                e.score, {**provenance, "phases": phases})
        self.entries.append(e)
        return e

    def _evaluate(self, source: str, generator: str, mode: str, parent: int | None,
                  provenance: dict[str, Any], primitive_ok: bool = False) -> Entry:
        key, path = self._write_candidate(source)
        r = self._check_here(Job(key, path, self.task.path, self._task_sha, self._config(primitive_ok), "check"))
        return self._commit(source, generator, mode, parent, provenance, r.verdict, [r.phase_record()])

    def _best(self, library: bool) -> Entry | None:
        pool = [e for e in self.entries if e.eligible and e.generator.startswith("library:") == library]
        return max(pool, key=lambda e: e.score or 0.0, default=None)

    # -- the loop -------------------------------------------------------------------
    def run(self) -> RunResult:
        done = {e.generator for e in self.entries}
        for name, src in library_candidates(self.task).items():
            if name in self.library and f"library:{name}" not in done and self.novelty.check(src) is None:
                e = self._evaluate(src, f"library:{name}", "library", None, {"generator": "library"}, True)
                self.progress(f"library {name}: {'accepted' if e.verdict.accepted else 'rejected'} score {e.score}")
        if self.search.jobs > 1:
            self.pool = EvaluatorPool(Path(self.cfg.cache_dir) / "runs" / str(self.run_id) / "jobs",
                                      self.search.evaluator_command, self.search.eval_timeout)
        stop = self.spent.exhausted(self.budget)
        dry = 0  # new-proposal asks in a row that gave nothing to evaluate
        while True:
            # 1. fill the free slots: debug/repair rounds first, then new proposals round-robin;
            #    none while candidates wait for the device (timing runs alone)
            while stop is None and not self._to_time and self._in_flight() < self.search.jobs:
                if self._queue:
                    self._propose(self._queue.popleft())
                elif dry < len(self.generators):
                    gen = self.generators[self._next_gen % len(self.generators)]
                    self._next_gen += 1
                    dry = 0 if self._propose(Work(gen)) else dry + 1
                else:
                    break
                stop = stop or self.spent.exhausted(self.budget)
            # 2. timing, one candidate at a time, with no other evaluation running on the device
            if self._to_time and self._in_flight() == 0:
                while self._to_time:
                    untimed = self._to_time.popleft()
                    pend: Pending = untimed.job.payload
                    self._pool().submit(replace(untimed.job, key=next(self._keys), config=pend.config, phase="timed"))
                    r = self._pool().next()
                    stop = self._finish_one(pend, r.verdict, [untimed.phase_record(), r.phase_record()]) or stop
                continue
            if self._in_flight() == 0:  # nothing running, nothing to start: a budget, or no generator has more
                stop = stop or "generators have nothing new to propose"
                break
            # 3. the next result to arrive
            r = self._arrived.popleft() if self._arrived else self._pool().next()
            dry = 0
            pend = r.job.payload
            if r.job.phase == "untimed" and r.verdict.accepted and self.cfg.timing:
                self._to_time.append(r)
            else:
                stop = self._finish_one(pend, r.verdict, [r.phase_record()]) or stop
        return self._finish(stop or "")

    def _pool(self) -> EvaluatorPool:
        assert self.pool is not None
        return self.pool

    def _in_flight(self) -> int:
        return len(self._arrived) + (self.pool.running if self.pool else 0)

    def _propose(self, work: Work) -> bool:
        """Ask ``work.gen`` for a proposal and start its evaluation; False when there was nothing to evaluate."""
        gen, mode, parent = work.gen, work.mode, work.parent
        attempts = work.attempts
        if attempts is None:  # a new proposal: its parent is drawn from the measured beam
            chosen = self.parents.choose(self.entries, island=gen.name)
            parent = chosen.seq if chosen else None
            attempts = self._attempts(chosen)
        req = Request(self.task.description or self.task.name, self.task.source, self.hardware,
                      list(self.examples), attempts, mode, parent)  # type: ignore[arg-type]
        try:
            prop = gen.propose(req)
        except UserError:
            raise
        except AssayError as e:  # the provider refused or retries ran out: log it, count it, go on
            self.progress(f"{gen.name}: proposal failed: {e}")
            self.spent.candidates += 1
            return False
        self.spent.tokens += int(getattr(prop, "tokens_in", 0) + getattr(prop, "tokens_out", 0))
        self.spent.usd += float(getattr(prop, "cost_usd", 0.0))
        if prop is None or getattr(prop, "source", None) is None:
            self.spent.candidates += 1
            return False
        # tuned configurations of a template differ in a few numbers by design: exact repeats only
        why = self.novelty.check(prop.source, near=(mode == "new" and not getattr(prop, "params", None)))
        if why is not None:
            self.progress(f"{gen.name}: skipped, {why}")
            return False
        self.spent.candidates += 1
        prov = {"generator": getattr(prop, "generator", gen.name), "model": getattr(prop, "model", ""),
                "prompt_hash": getattr(prop, "prompt_hash", ""), "usd": getattr(prop, "cost_usd", 0.0),
                "tokens": int(getattr(prop, "tokens_in", 0) + getattr(prop, "tokens_out", 0)),
                "params": getattr(prop, "params", None), "island": gen.name}
        key, path = self._write_candidate(prop.source)
        pend = Pending(work, prop, prop.source, getattr(prop, "generator", None) or gen.name, parent, prov,
                       self._config(False))
        if self.pool is None:
            self._arrived.append(self._check_here(Job(key, path, self.task.path, "", pend.config, "check", pend)))
        else:
            untimed = pend.config.model_copy(update={"timing": False})
            self.pool.submit(Job(key, path, str(Path(self.task.path).resolve()), self._task_sha, untimed,
                                 "untimed", pend))
        return True

    def _finish_one(self, pend: "Pending", v: Verdict, phases: list[dict[str, Any]]) -> str | None:
        """Commit a finished evaluation, tell its generator, queue its debug round; a reason to stop, or None."""
        e = self._commit(pend.source, pend.generator, pend.work.mode, pend.parent, pend.provenance, v, phases)
        gen = pend.work.gen
        if hasattr(gen, "feedback"):
            gen.feedback(pend.proposal, e.verdict)
        follow = self._debug_work(pend.work, e)
        if follow is not None:
            self._queue.append(follow)
        best = self._best(False)
        roof = _roofline(best.verdict) if best else None
        base = self._best(True)
        self.progress(f"{self.spent.candidates}/{self.budget.candidates} candidates (#{e.seq} {e.generator}: "
                      f"{'accepted' if e.verdict.accepted else 'rejected'}); best not slower than a baseline: "
                      f"{_speed(best) if best else 'none yet'} (best baseline {_speed(base) if base else '?'}); "
                      f"left: {self.spent.left(self.budget)}")
        if roof is not None and self.budget.roofline_stop and roof >= self.budget.roofline_stop:
            return f"a candidate reached {roof:.0%} of the roofline"
        return None

    def _debug_work(self, work: "Work", e: Entry) -> "Work | None":
        cats = e.verdict.categories
        if e.verdict.accepted or not ({Category.correctness, Category.build} & cats):
            return None
        left = self.debug_rounds if work.rounds_left is None else work.rounds_left
        if left <= 0 or self.spent.exhausted(self.budget):
            return None
        err = error_size(e.verdict)
        # convergence guard: stop debugging after `debug_rounds` rounds that do not shrink the error
        stale = work.stale + 1 if (err is not None and work.last_err is not None and err >= work.last_err) else 0
        if stale >= self.debug_rounds:
            return None
        mode = "repair" if Category.build in cats else "debug"
        return Work(work.gen, mode, [Attempt(e.source, summarize(e.verdict))], e.seq, left - 1, err, stale)

    def _attempts(self, parent: Entry | None = None, k: int = 4) -> list[Attempt]:
        """What a new proposal is shown, best first; its parent (when there is one) first of all."""
        ranked = sorted(self.entries, key=lambda e: (e.verdict.accepted, e.score or 0.0), reverse=True)
        if parent is not None:
            ranked = [parent] + [e for e in ranked if e.seq != parent.seq]
        return [Attempt(e.source, summarize(e.verdict)) for e in ranked[:k]]

    def _finish(self, stop: str) -> RunResult:
        best, base = self._best(False), self._best(True)
        beat = best is not None and (base is None or (best.score or 0) > (base.score or 0))
        held = None
        if beat and best is not None:
            held = self.held_out(best)
            if not held.accepted:
                self.progress("best candidate FAILED the held-out check; falling back to the best baseline")
                beat = False
        result = RunResult(self.run_id, best if beat else None, base, beat, held, list(self.entries),
                           self.spent.as_dict(), stop)
        self._write_back(best if beat else None)
        self.runs.finish(self.run_id, {"stop": stop, "beat_baselines": beat,
                                       "best_seq": (best.seq if beat and best else base.seq if base else None),
                                       "spent": self.spent.as_dict()})
        return result

    def _write_back(self, winner: Entry | None) -> None:
        """Every accepted winner and every caught cheat goes into the knowledge base."""
        if self.memory is None:
            return
        prov = {"run": self.run_id, "task": self.task.name}
        if winner is not None:
            self.memory.add("winner", self.task, self.hardware, winner.source, summarize(winner.verdict),
                            {**prov, "generator": winner.generator}, signature=self.signature)
        for e in self.entries:
            if not e.generator.startswith("library:") and Category.integrity in e.verdict.categories:
                self.memory.add("cheat", self.task, self.hardware, e.source, summarize(e.verdict),
                                {**prov, "generator": e.generator}, signature=self.signature)

    def held_out(self, e: Entry) -> Verdict:
        """Re-verify on shapes and seeds never shown to a generator: a fresh secret and perturbed workloads."""
        extra = []
        for w in self.task.workloads:
            dims = {k: self.task.dims[k].clamp(int(v * 1.5) + 1) for k, v in w.dims.items()}
            extra.append(Workload(dims, w.weight))
        held_task = replace(self.task, workloads=tuple(self.task.workloads) + tuple(extra))
        path = Path(self.cfg.cache_dir) / "runs" / str(self.run_id) / "held_out.py"
        path.write_text(e.source)
        cfg = self.cfg.model_copy(update={"secret": None, "timing": self.cfg.timing})
        return check(path, held_task, config=cfg)


def _speed(e: Entry) -> str:
    """``#seq generator 1.23x``: the score (``feedback.score``: against eager, else the strongest baseline)."""
    return f"#{e.seq} {e.generator} {e.score:.3g}x" if e.score else f"#{e.seq} {e.generator} (untimed)"


def _roofline(v: Verdict) -> float | None:
    t = v.stage("timing")
    if t is None:
        return None
    fr = [s["roofline"]["fraction"] for s in t.evidence.get("shapes", []) if s.get("roofline", {}).get("fraction")]
    return min(fr) if fr else None


def _hardware(cfg: CheckConfig) -> str:
    from assay.measure.environment import environment

    env = environment(cfg.device)
    keys = ("gpu", "sm_count", "gpu_memory_gb", "capability", "cuda", "torch", "triton", "cpu")
    return ", ".join(f"{k}={env[k]}" for k in keys if env.get(k) is not None)

