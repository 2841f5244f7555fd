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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from assay.config import CheckConfig
from assay.errors import AssayError, UserError
from assay.evaluate import check
from assay.generators.base import Attempt, Generator, Request
from assay.search.budget import Budget, Spent
from assay.search.feedback import error_size, score, slower_than_a_baseline, summarize
from assay.search.library import library_candidates
from assay.search.novelty import NoveltyFilter, source_hash
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
    parent: int | None = None

    @property
    def eligible(self) -> bool:
        """Accepted, timed, and (for a generated kernel) not slower than any baseline."""
        if not (self.verdict.accepted and self.score is not None):
            return False
        return self.generator.startswith("library:") or not slower_than_a_baseline(self.verdict)


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
                 library: tuple[str, ...] | None = None, memory: Any = None) -> None:
        # torch.compile on the CPU spends tens of seconds compiling for a target that is not ours
        self.library = library or (("eager", "compile") if cfg.device == "cuda" else ("eager",))
        self.memory = memory
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
        self.run_id = run_id if run_id is not None else runs.new_run(
            task.path, hashlib.sha256(task.source.encode()).hexdigest()[:16],
            {"device": cfg.device, "budget": budget.__dict__, "generators": [g.name for g in generators]})
        self._resume()

    # -- bookkeeping ----------------------------------------------------------------
    def _resume(self) -> None:
        for row in self.runs.candidates(self.run_id):
            self.novelty.check(row.source)
            v = Verdict.model_validate(row.verdict)
            self.entries.append(Entry(row.seq, row.source, row.generator, v, row.score, row.mode, row.parent))
            if not row.generator.startswith("library:"):
                self.spent.candidates += 1
            self.spent.tokens += int(row.provenance.get("tokens", 0))
            self.spent.usd += float(row.provenance.get("usd", 0.0))

    def _evaluate(self, source: str, generator: str, mode: str, parent: int | None,
                  provenance: dict[str, Any], primitive_ok: bool = False) -> Entry:
        path = Path(self.cfg.cache_dir) / "runs" / str(self.run_id) / f"cand_{len(self.entries):04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        cfg = self.cfg.model_copy(update={"require_custom_kernel": not primitive_ok and self.cfg.require_custom_kernel})
        v = check(path, self.task, config=cfg)
        self.spent.device_seconds += v.seconds
        e = Entry(len(self.entries), source, generator, v, score(v), mode, parent)
        self.runs.add_candidate(self.run_id, e.seq, source, source_hash(source), generator, parent, mode, v,
                                e.score, provenance)
        self.entries.append(e)
        return e

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
        stop = self.spent.exhausted(self.budget)
        while stop is None:
            progressed = False
            for gen in self.generators:
                stop = self.spent.exhausted(self.budget)
                if stop:
                    break
                progressed |= self._one_proposal(gen)
                best = self._best(False)
                roof = _roofline(best.verdict) if best else None
                self.progress(f"{self.spent.candidates} candidates; best score "
                              f"{best.score if best else None}; spent {self.spent.as_dict()}")
                if roof is not None and self.budget.roofline_stop and roof >= self.budget.roofline_stop:
                    stop = f"a candidate reached {roof:.0%} of the roofline"
                    break
            if not progressed and stop is None:
                stop = "generators have nothing new to propose"
        return self._finish(stop or "")

    def _one_proposal(self, gen: Generator, mode: str = "new", attempts: list[Attempt] | None = None,
                      parent: int | None = None, rounds_left: int | None = None, last_err: float | None = None,
                      stale: int = 0) -> bool:
        req = Request(self.task.description or self.task.name, self.task.source, self.hardware,
                      list(self.examples), attempts or self._attempts(), mode)
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
                "params": getattr(prop, "params", None)}
        e = self._evaluate(prop.source, getattr(prop, "generator", None) or gen.name, mode, parent, prov)
        if hasattr(gen, "feedback"):
            gen.feedback(prop, e.verdict)
        self._maybe_debug(gen, e, rounds_left, last_err, stale)
        return True

    def _maybe_debug(self, gen: Generator, e: Entry, rounds_left: int | None, last_err: float | None,
                     stale: int) -> None:
        cats = e.verdict.categories
        if e.verdict.accepted or not ({Category.correctness, Category.build} & cats):
            return
        left = self.debug_rounds if rounds_left is None else rounds_left
        if left <= 0 or self.spent.exhausted(self.budget):
            return
        err = error_size(e.verdict)
        # convergence guard: stop debugging after `debug_rounds` rounds that do not shrink the error
        stale = stale + 1 if (err is not None and last_err is not None and err >= last_err) else 0
        if stale >= self.debug_rounds:
            return
        mode = "repair" if Category.build in cats else "debug"
        self._one_proposal(gen, mode, [Attempt(e.source, summarize(e.verdict))], e.seq, left - 1, err, stale)

    def _attempts(self, k: int = 4) -> list[Attempt]:
        ranked = sorted(self.entries, key=lambda e: (e.verdict.accepted, e.score or 0.0), reverse=True)
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

