"""Parallel evaluation (jobs > 1) and parent selection: real evaluator processes, real SQLite."""

import sys
from pathlib import Path

from test_loop import KERNEL, KERNEL2, TASK, P, Scripted

from assay.config import CheckConfig
from assay.search.budget import Budget
from assay.search.evaluator import EvaluatorPool, Job
from assay.search.loop import Entry, SearchConfig, Supervisor
from assay.search.parents import ParentPolicy, ParentSelector
from assay.store.db import Store
from assay.store.runs import RunStore
from assay.task import load_task
from assay.verdict import Category, Verdict

HERE = Path(__file__).parent
CRASH = "# CRASH_EVALUATOR\ndef scale(x):\n    return x * 3.0\n"


class Listed:
    """Proposes the given sources in order, then nothing; remembers every request."""

    name = "listed"

    def __init__(self, sources):
        self.sources, self.requests = list(sources), []

    def propose(self, req):
        self.requests.append(req)
        return P(self.sources.pop(0) if self.sources else None, generator="listed")


def overlap(a, b):
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_jobs2_checks_concurrently_times_alone_stores_everything_and_survives_a_crash(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    task = load_task(tmp_path / "task.py")
    cfg = CheckConfig(device="cpu", time_budget=2, cache_dir=tmp_path / "cache")
    runs = RunStore(Store(f"sqlite:///{tmp_path}/db.sqlite"))
    gen = Listed([KERNEL.replace("FACTOR", "3.0"), KERNEL2, CRASH])
    search = SearchConfig(jobs=2, parents=ParentPolicy(beam=2, seed=1),
                          evaluator_command=(sys.executable, str(HERE / "crashy_evaluator.py")))
    res = Supervisor(task, [gen], cfg, Budget(candidates=3, seconds=600), runs, library=("eager",),
                     search=search).run()

    rows = runs.candidates(res.run_id)
    assert [r.seq for r in rows] == list(range(4)) and len(res.entries) == 4  # library + 3: nothing lost
    listed = [e for e in res.entries if e.generator == "listed"]
    good = [e for e in listed if "CRASH" not in e.source]
    crashed = next(e for e in listed if "CRASH" in e.source)
    # the two kernels were checked at the same time, in two different evaluator processes
    u0, u1 = (e.phases[0] for e in good)
    assert u0["phase"] == u1["phase"] == "untimed" and u0["pid"] != u1["pid"] and overlap(u0, u1)
    # ...and timed afterwards, each alone: no timed interval overlaps any other evaluation
    assert all(e.verdict.accepted and e.score is not None and [p["phase"] for p in e.phases] == ["untimed", "timed"]
               for e in good), [e.verdict.reasons for e in good]
    every = [(e.seq, p) for e in res.entries for p in e.phases]
    for seq, t in every:
        if t["phase"] == "timed":
            assert not any(overlap(t, p) for s, p in every if (s, p["phase"]) != (seq, "timed"))
    # the crashed evaluator is a rejected robustness verdict; the run went on and stored it
    assert not crashed.verdict.accepted and crashed.verdict.categories == {Category.robustness}
    assert "evaluator process died" in crashed.verdict.reasons[0].message
    assert crashed.phases[0]["crashed"]
    stored = {r.seq: r for r in rows}
    assert Verdict.model_validate(stored[crashed.seq].verdict) == crashed.verdict
    assert stored[crashed.seq].provenance["phases"] == crashed.phases
    # the third proposal came after the two were measured: its parent is from the beam, recorded as used
    third = gen.requests[2]
    assert third.parent in {e.seq for e in good} and crashed.parent == third.parent
    assert stored[crashed.seq].parent == third.parent
    parent = next(e for e in res.entries if e.seq == third.parent)
    assert third.attempts[0].source == parent.source
    assert gen.requests[0].parent is None and gen.requests[1].parent is None  # nothing measured yet
    assert res.spent["candidates"] == 3


def test_jobs2_debug_rounds_go_through_the_evaluator_processes(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    task = load_task(tmp_path / "task.py")
    cfg = CheckConfig(device="cpu", time_budget=2, cache_dir=tmp_path / "cache", timing=False)
    runs = RunStore(Store(f"sqlite:///{tmp_path}/db.sqlite"))
    gen = Scripted()
    res = Supervisor(task, [gen], cfg, Budget(candidates=2, seconds=600), runs, library=("eager",),
                     search=SearchConfig(jobs=2)).run()
    wrong = next(e for e in res.entries if e.mode == "new")
    fixed = next(e for e in res.entries if e.mode == "debug")
    assert not wrong.verdict.accepted and Category.correctness in wrong.verdict.categories
    assert fixed.verdict.accepted and fixed.parent == wrong.seq
    assert [p["phase"] for p in fixed.phases] == ["untimed"] and fixed.phases[0]["pid"] != wrong.phases[0]["pid"]
    debug_req = next(r for r in gen.requests if r.mode == "debug")
    assert debug_req.parent == wrong.seq and "where:" in debug_req.attempts[0].verdict_summary
    assert [r.parent for r in runs.candidates(res.run_id)] == [e.parent for e in res.entries]


def _entry(seq, score, gen="g", accepted=True, library=False):
    v = Verdict(accepted=accepted)
    return Entry(seq, f"src{seq}", "library:eager" if library else gen, v, score, "new", None, island=gen)


def test_parent_selection_is_a_seeded_tournament_over_the_beam():
    entries = [_entry(0, 5.0, library=True), _entry(1, 1.0), _entry(2, 3.0), _entry(3, 2.0), _entry(4, None),
               _entry(5, 9.0, accepted=False), _entry(6, 0.5), _entry(7, 4.0, gen="h")]
    sel = ParentSelector(ParentPolicy(beam=3, pressure=2, seed=7))
    # the beam: accepted, timed, generated entries, fastest first
    assert [e.seq for e in sel.beam(entries)] == [7, 2, 3]
    picks = [sel.choose(entries).seq for _ in range(200)]
    again = ParentSelector(ParentPolicy(beam=3, pressure=2, seed=7))
    assert [again.choose(entries).seq for _ in range(200)] == picks  # same seed, same parents
    assert set(picks) == {7, 2, 3}  # exploration: every beam member gets picked...
    assert picks.count(7) > picks.count(2) > picks.count(3)  # ...the fastest most often
    greedy = ParentSelector(ParentPolicy(beam=3, pressure=1000))
    assert {greedy.choose(entries).seq for _ in range(20)} == {7}
    assert ParentSelector().choose([_entry(0, 5.0, library=True), _entry(1, None)]) is None
    # islands: a generator's parents come from its own entries, unless it migrates
    isl = ParentSelector(ParentPolicy(beam=3, islands=True, migration=0.0, seed=1))
    assert {isl.choose(entries, island="g").seq for _ in range(50)} <= {2, 3, 1}
    assert {isl.choose(entries, island="h").seq for _ in range(50)} == {7}
    assert isl.choose(entries, island="new").seq in {7, 2, 3}  # an empty island draws from the whole beam


def test_an_evaluator_that_dies_or_hangs_is_a_rejected_robustness_verdict(tmp_path):
    cfg = CheckConfig(device="cpu", cache_dir=tmp_path)
    job = Job(0, tmp_path / "cand.py", str(tmp_path / "task.py"), "0" * 64, cfg, "untimed")
    dies = EvaluatorPool(tmp_path / "a", command=[sys.executable, "-c", "import os, sys; print('boom'); os._exit(7)"])
    dies.submit(job)
    r = dies.next()
    assert not r.verdict.accepted and r.verdict.categories == {Category.robustness}
    assert "exit status 7" in r.verdict.reasons[0].message
    assert "boom" in r.verdict.stages[0].findings[0].evidence["log_tail"]
    hangs = EvaluatorPool(tmp_path / "b", command=[sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    hangs.submit(job)
    r = hangs.next()
    assert "killed" in r.verdict.reasons[0].message and r.crashed and hangs.running == 0
