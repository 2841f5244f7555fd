"""The offline generator end to end on CPU: knowledge-base templates through the real evaluator."""

from pathlib import Path

from assay.config import CheckConfig
from assay.generators.builtin import BuiltinGenerator
from assay.search.budget import Budget
from assay.search.loop import Supervisor
from assay.store.db import Store
from assay.store.runs import RunStore
from assay.task import load_task

ROOT = Path(__file__).resolve().parents[2]


def test_offline_search_proposes_matched_kernels_and_tunes_them(tmp_path):
    task = load_task(ROOT / "examples" / "softmax_small_task.py")
    gen = BuiltinGenerator(task, device="cpu", seed=0)
    names = [t.name for t in gen.templates()]
    assert names and all("softmax" in n and "log" not in n for n in names)
    cfg = CheckConfig(device="cpu", time_budget=3, cache_dir=tmp_path / "cache")
    runs = RunStore(Store(f"sqlite:///{tmp_path}/db.sqlite"))
    res = Supervisor(task, [gen], cfg, Budget(candidates=3, seconds=600), runs).run()
    built = [e for e in res.entries if e.generator.startswith("builtin:")]
    assert len(built) == 3
    assert all(e.verdict.accepted for e in built), [e.verdict.reasons for e in built]
    assert all(e.verdict.candidate["label"] == "custom kernel" for e in built)
    # tuned: the parameters differ between proposals of the same template, and optuna saw the times
    rows = runs.candidates(res.run_id)
    params = [r.provenance.get("params") for r in rows if r.generator.startswith("builtin:")]
    assert len({repr(p) for p in params}) == 3
    assert sum(len(s.trials) for s in gen._studies.values()) >= 1
    # interpreted Triton on a CPU never beats eager: the answer is the baseline
    assert not res.beat_baselines and res.baseline_best.generator == "library:eager"
