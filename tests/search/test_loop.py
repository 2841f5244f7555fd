"""The search loop on CPU with a scripted generator (real evaluator, real store, real workers)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from assay.config import CheckConfig
from assay.search.budget import Budget
from assay.search.loop import Supervisor
from assay.search.novelty import NoveltyFilter
from assay.store.db import Store
from assay.store.runs import RunStore
from assay.task import load_task

TASK = '''
import torch
import assay

def scale(x):
    return x * 3.0

task = assay.Task(name="scale", reference=scale, dims={"N": assay.Dim(1, 600)},
                  inputs=[assay.Input("x", ("N",))], workloads=[assay.Workload({"N": 256})])
'''

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * FACTOR, mask=m)


def scale(x):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y
'''


KERNEL2 = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _times_three(src, dst, count, WIDTH: tl.constexpr):
    pid = tl.program_id(axis=0)
    idx = pid * WIDTH + tl.arange(0, WIDTH)
    keep = idx < count
    v = tl.load(src + idx, mask=keep, other=0.0)
    tl.store(dst + idx, v + v + v, mask=keep)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    _times_three[((n + 63) // 64,)](x, out, n, WIDTH=64)
    return out
'''


@dataclass
class P:
    source: str | None
    generator: str = "scripted"
    model: str = "script"
    tokens_in: int = 10
    tokens_out: int = 20
    cost_usd: float = 0.001


class Scripted:
    """Proposes a kernel with a wrong constant; when asked to debug, the fix."""

    name = "scripted"

    def __init__(self):
        self.requests = []

    def propose(self, req):
        self.requests.append(req)
        if req.mode == "debug":
            return P(KERNEL.replace("FACTOR", "3.0"))
        return P(KERNEL.replace("FACTOR", "3.01"))


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    task = load_task(tmp_path / "task.py")
    cfg = CheckConfig(device="cpu", time_budget=3, cache_dir=tmp_path / "cache")
    runs = RunStore(Store(f"sqlite:///{tmp_path}/db.sqlite"))
    return task, cfg, runs, tmp_path


def test_debug_round_fixes_the_kernel_and_never_returns_a_slower_one(setup):
    task, cfg, runs, _ = setup
    gen = Scripted()
    sup = Supervisor(task, [gen], cfg, Budget(candidates=2, seconds=300), runs, library=("eager",))
    res = sup.run()
    modes = [(e.generator, e.mode, e.verdict.accepted) for e in res.entries]
    assert ("library:eager", "library", True) in modes
    wrong = next(e for e in res.entries if e.generator == "scripted" and e.mode == "new")
    fixed = next(e for e in res.entries if e.mode == "debug")
    assert not wrong.verdict.accepted and fixed.verdict.accepted and fixed.parent == wrong.seq
    # the debug request carried the minimal failing case of the wrong kernel
    debug_req = next(r for r in gen.requests if r.mode == "debug")
    assert "correctness" in debug_req.attempts[0].verdict_summary
    assert "where:" in debug_req.attempts[0].verdict_summary
    # an interpreted Triton kernel on the CPU is far slower than eager: the answer is the baseline
    assert not res.beat_baselines and res.best is None
    assert res.baseline_best is not None and res.baseline_best.generator.startswith("library:")
    assert res.spent["tokens"] == 60 and res.spent["candidates"] == 2


def test_resume_continues_from_the_store(setup):
    task, cfg, runs, _ = setup
    first = Supervisor(task, [Scripted()], cfg, Budget(candidates=1, seconds=300), runs, library=("eager",))
    r1 = first.run()
    n1 = len(runs.candidates(r1.run_id))
    # a new supervisor on the same run id: nothing already evaluated is evaluated again
    class Fixed(Scripted):
        def propose(self, req):
            return P(KERNEL2)

    again = Supervisor(task, [Fixed()], cfg, Budget(candidates=2, seconds=300), runs, run_id=r1.run_id,
                       library=("eager",))
    assert len(again.entries) == n1
    r2 = again.run()
    rows = runs.candidates(r1.run_id)
    assert len(rows) > n1
    assert len({r.source_hash for r in rows}) == len(rows)  # no duplicate evaluations
    assert r2.run_id == r1.run_id


def test_novelty_filter_catches_reformatted_and_near_duplicates():
    f = NoveltyFilter(threshold=0.95)
    a = KERNEL.replace("FACTOR", "3.0")
    assert f.check(a) is None
    assert "identical" in f.check(a.replace("    m = offs", "    # a comment\n    m = offs"))
    assert "near-duplicate" in f.check(a.replace("BLOCK=128", "BLOCK=256"))
    assert f.check("def scale(x):\n    return x + x + x\n") is None


def test_caught_cheats_are_written_back_and_winners_retrieved(setup):
    from assay.knowledge.memory import Memory

    task, cfg, runs, tmp = setup
    memory = Memory(Store(f"sqlite:///{tmp}/db.sqlite"))

    class Cheat(Scripted):
        def propose(self, req):
            return P("def scale(x):\n    y = x * 3.0\n    x.zero_()\n    return y\n")

    sup = Supervisor(task, [Cheat()], cfg.model_copy(update={"timing": False}), Budget(candidates=1, seconds=300),
                     runs, library=("eager",), memory=memory)
    sup.run()
    cheats = memory.retrieve(sup.signature, sup.hardware, kind="cheat")
    assert len(cheats) == 1 and "x.zero_()" in cheats[0].source and "integrity" in cheats[0].summary
    assert sup.signature == "mul"
    # a winner stored for this signature is handed to the next run's generators as an example
    memory.add("winner", task, sup.hardware, "def scale(x):\n    return x * 3\n", "fast", {}, signature="mul")
    again = Supervisor(task, [Scripted()], cfg, Budget(candidates=0, seconds=300), runs, library=("eager",),
                       memory=memory)
    assert again.examples == ["def scale(x):\n    return x * 3\n"]


def test_score_is_the_eager_speedup_else_the_strongest_baseline():
    from assay.search.feedback import score
    from assay.verdict import StageResult, Status, Verdict

    def timed(geo):
        return Verdict(accepted=True, stages=[StageResult(name="timing", status=Status.passed,
                                                          evidence={"geomean_speedup": geo})])

    assert score(timed({"eager": 1.5, "compile": 0.9})) == 1.5
    # timed against compile baselines only (--baseline compile ...): the strongest one decides
    assert score(timed({"compile": 1.2, "compile:max-autotune-no-cudagraphs": 0.8})) == 0.8
    assert score(timed({})) is None
    assert score(Verdict(accepted=True)) is None


def test_budget_left_names_every_budget_that_is_set():
    from assay.search.budget import Spent

    b = Budget(candidates=5, seconds=100, tokens=1000, usd=2.0, device_seconds=50)
    s = Spent(candidates=2, tokens=400, usd=0.5, device_seconds=60)
    left = s.left(b)
    assert left.startswith("3 candidates, ") and "600 tokens" in left and "$1.50" in left
    assert "0 device s" in left  # over budget shows 0, never a negative
    assert s.exhausted(b) == "device-time budget (50 s) spent"
    assert Spent().left(Budget(candidates=4, seconds=10)).startswith("4 candidates, ")
    assert "tokens" not in Spent().left(Budget(candidates=4, seconds=10))
