"""The timing stage on the CPU: baselines in their own workers (the cuda default), the evaluator
fallback for a task without a source file, the baseline drift cache, timing-loop helpers."""

from __future__ import annotations

import secrets
from pathlib import Path

import torch

from assay.candidate.source import load_candidate
from assay.config import CheckConfig
from assay.evaluate import _build, _env_for
from assay.measure import timing
from assay.measure.baselines import baseline_source
from assay.measure.stage import TimingConfig, run_timing
from assay.sandbox.process import Worker
from assay.task import Dim, Input, Task, Workload, load_task

ROOT = Path(__file__).parents[1]
RELU_TASK = ROOT / "tests" / "adversarial" / "tasks" / "relu.py"
RELU = ROOT / "tests" / "adversarial" / "candidates" / "relu_torch.py"


def _time(task: Task, cand: Path, tmp: Path, **kw: object):
    cfg = CheckConfig(device="cpu", cache_dir=tmp)
    c = load_candidate(cand, task.entry_name)
    w = Worker(device="cpu", cache_dir=tmp, extra_env=_env_for(c.source, c.language, cfg))
    w.start()
    try:
        assert _build(c, task, w, cfg).status.value == "passed"
        return run_timing(task, w, "cpu", secrets.token_bytes(16), TimingConfig.for_device("cpu", **kw), tmp)
    finally:
        w.close()


def test_baselines_in_their_own_workers_are_timed_like_the_candidate(tmp_path):
    st = _time(load_task(RELU_TASK), RELU, tmp_path, baseline_process="worker", max_time=0.5)
    ev = st.evidence
    assert st.status.value == "passed" and ev["baseline_process"] == "worker" and ev["notes"] == []
    (shape,) = ev["shapes"]
    # the worker side reports its spin calibration: the baseline was measured by the worker's loop
    assert set(shape["block_s"]) == {"candidate", "eager"}
    sp = shape["speedup"]["eager"]
    assert sp["lo"] <= sp["estimate"] <= sp["hi"] and sp["n"] >= 3
    # the same function on both sides: an A/A on a 2-core CPU, so only a loose bound
    assert 0.5 < sp["estimate"] < 2.0


def test_a_task_without_a_source_file_times_its_baseline_in_the_evaluator_and_says_so(tmp_path):
    task = Task(name="relu-mem", reference=torch.relu, dims={"M": Dim(1, 64), "N": Dim(1, 64)},
                inputs=[Input("x", ("M", "N"))], workloads=[Workload({"M": 16, "N": 32})], entry="relu")
    assert baseline_source(task, "eager") is None
    st = _time(task, RELU, tmp_path, baseline_process="worker", max_time=0.3)
    assert any("no source file" in n for n in st.evidence["notes"])
    assert "eager" in st.evidence["shapes"][0]["speedup"]


def test_baseline_drift_is_reported_against_the_last_check_on_the_same_stack(tmp_path):
    task = load_task(RELU_TASK)
    first = _time(task, RELU, tmp_path, max_time=0.3).evidence["shapes"][0]
    second = _time(task, RELU, tmp_path, max_time=0.3).evidence["shapes"][0]
    assert first["baseline_drift"] == {}
    assert set(second["baseline_drift"]) == {"eager"} and second["baseline_drift"]["eager"] > 0
    assert (tmp_path / "baselines.json").exists()


def test_baseline_sources_are_candidate_files_for_functions_and_modules(tmp_path):
    fn_task = load_task(RELU_TASK)
    src = baseline_source(fn_task, "compile:max-autotune-no-cudagraphs")
    assert "dynamic=False, mode='max-autotune-no-cudagraphs'" in src and "def relu(*args)" in src
    compile(src, "baseline.py", "exec")
    mod = load_task(ROOT / "tests" / "knowledge" / "tasks" / "softmax_module.py")
    msrc = baseline_source(mod, "eager", "float16")
    assert "class ModelNew(" in msrc and "self.to(_t.float16)" in msrc
    compile(msrc, "baseline.py", "exec")


def test_sampled_recheck_positions_are_reproducible_and_bounded():
    a = timing.sample_index(10_000, 100, seed=7)
    b = timing.sample_index(10_000, 100, seed=7)
    assert torch.equal(a, b) and a.numel() == 100 and int(a.max()) < 10_000
    assert timing.sample_index(50, 100, seed=7) is None  # few elements: all are re-checked
    assert timing.block_for(lambda: None, [[]], "cpu") == 0.0


def test_a_task_that_imports_a_sibling_module_gets_its_baseline_worker(tmp_path):
    """The baseline file is the task's source run elsewhere; it keeps the task's own __file__, so a
    task that finds a sibling module through it (a common pattern) loads in the worker too."""
    work = tmp_path / "task"
    work.mkdir()
    (work / "my_ops.py").write_text("import torch\n\n\ndef relu(x):\n    return torch.relu(x)\n")
    (work / "task.py").write_text(
        "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent))\n"
        "import assay  # noqa: E402\nfrom my_ops import relu  # noqa: E402\n\n"
        "task = assay.Task(name='sib', reference=relu, dims={'M': assay.Dim(1, 64), 'N': assay.Dim(1, 64)},\n"
        "                  inputs=[assay.Input('x', ('M', 'N'))], workloads=[assay.Workload({'M': 16, 'N': 32})])\n")
    st = _time(load_task(work / "task.py"), RELU, tmp_path, baseline_process="worker", max_time=0.3)
    assert st.evidence["notes"] == [] and set(st.evidence["shapes"][0]["block_s"]) == {"candidate", "eager"}


def test_the_in_loop_recheck_on_sampled_elements_agrees_between_worker_and_evaluator(tmp_path):
    """With fewer re-checked elements than the output has (4096 > 64), the worker sends a seeded
    sample and the evaluator samples its reference the same way: an honest kernel passes."""
    st = _time(load_task(RELU_TASK), RELU, tmp_path, recheck_elements=64, max_time=0.3)
    assert st.status.value == "passed" and not st.findings
    t = torch.arange(10_000.0)
    assert torch.equal(timing.sample(t, 100, 3), t[timing.sample_index(10_000, 100, 3)])


THREADS_PROBE = '''
import torch

SEEN = []


def relu(x):
    SEEN.append(torch.get_num_threads())
    if x.numel() == 2:  # the test's question: the fewest and most threads seen so far
        return torch.tensor([float(min(SEEN)), float(max(SEEN))])
    return torch.relu(x)
'''


def test_cpu_timings_run_with_the_configured_threads_on_every_side(tmp_path):
    """On the CPU every side is timed single-threaded by default (an OpenMP barrier on a loaded
    2-core machine stalls for a time slice); the worker's own calls outside timing keep torch's
    default, and so does the evaluator after a local side's round."""
    from assay.measure.sides import LocalSide, WorkerSide

    assert TimingConfig.for_device("cpu").cpu_threads == 1 and TimingConfig.for_device("cuda").cpu_threads == 0
    default = torch.get_num_threads()
    with timing.cpu_threads(1):
        assert torch.get_num_threads() == 1
    with timing.cpu_threads(0):
        assert torch.get_num_threads() == default
    assert torch.get_num_threads() == default

    cand = tmp_path / "probe.py"
    cand.write_text(THREADS_PROBE)
    task = load_task(RELU_TASK)
    cfg = CheckConfig(device="cpu", cache_dir=tmp_path)
    c = load_candidate(cand, task.entry_name)
    w = Worker(device="cpu", cache_dir=tmp_path, extra_env=_env_for(c.source, c.language, cfg))
    w.start()
    try:
        assert _build(c, task, w, cfg).status.value == "passed"
        side = WorkerSide("candidate", w, threads=1)
        side.stage(None, [[torch.randn(4, 8)]])
        assert side.time(3, 0, None, None)["ok"]
        resp = w.request({"op": "run", "inputs": [torch.zeros(2)]}, 60)
        fewest, most = resp["outputs"][0].tolist()
        assert fewest == 1.0  # the timed calls
        assert most == float(default)  # the untimed call after them: torch's default again
    finally:
        w.close()

    seen: list[int] = []
    local = LocalSide("eager", lambda x: seen.append(torch.get_num_threads()) or x, "cpu", timing.Flusher("cpu"),
                      threads=1)
    local.stage(None, [[torch.zeros(3)]])
    local.time(2, 0, None, None)
    assert seen == [1, 1] and torch.get_num_threads() == default


NO_DYNAMO_PROBE = '''
import sys

import torch


def relu(x):
    if "torch._dynamo" in sys.modules:  # ~2 s of import in every worker, for nothing
        raise RuntimeError("torch._dynamo was imported in the worker")
    return torch.relu(x)
'''


def test_a_check_never_imports_torch_dynamo_in_the_worker(tmp_path):
    """The worker's op recorder (integrity trace) opts out of torch's dynamo.disable wrapper: the
    candidate, called again by the timing stage after the trace, still finds no torch._dynamo."""
    from assay.evaluate import check

    cand = tmp_path / "probe.py"
    cand.write_text(NO_DYNAMO_PROBE)
    v = check(cand, RELU_TASK, device="cpu", require_custom_kernel=False, time_budget=2, cache_dir=tmp_path)
    assert v.accepted, [(r.category.value, r.message) for r in v.reasons]
    assert v.stage("integrity") is not None and v.stage("timing").status.value == "passed"
