"""The timing stage: the candidate and live baselines, each in its own worker, interleaved.

Per workload shape: K input sets of fresh values, the same in every process; warm-up excluded
(its duration recorded: for torch.compile, the compile time); rounds of ``A B C, C B A, ...``
(candidate, eager, torch.compile modes; the order alternates) until every side's samples
converge (AdaptiveStop) and a minimum number of rounds is reached, or the time cap. Baselines
are candidate files (``baselines.baseline_source``) timed by the same worker code as the
candidate, so an A/A comparison is symmetric by construction; on the CPU (or for a task with no
source file) they are timed in the evaluator with the same loop. The candidate's output of
each round (a seeded sample of its elements) is re-checked against the reference for the set it
was computed on (replay/caching cheats fail here); the worker's reported times are
cross-checked against the evaluator's own wall clock; work escaping the timed stream is
measured and charged; speedup per baseline with a paired-bootstrap 95% CI over rounds;
roofline floor and plausibility gate; on CUDA a hot (graph replay) number and the profiler's
kernel time.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from assay.measure import roofline, stats
from assay.measure.sides import BaselineFailed, Side, WorkerSide, baseline_sides, local_fn
from assay.measure.timing import Flusher, clocks, null_escapes, reset_persisting_l2
from assay.measure.timing import sample as sample_elements
from assay.sandbox.process import Worker, WorkerDied
from assay.task.spec import Task
from assay.verdict import Category, Finding, StageResult, Status
from assay.verify import compare as cmp
from assay.verify.cases import Budget, Case, derive_seed, shrink_to
from assay.verify.inputs import make_inputs
from assay.verify.reference import run_reference


@dataclass
class TimingConfig:
    sets: int = 4
    sets_bytes: int = 1 << 30  # at most this much input per process (at least 2 sets)
    per_round: int = 5
    warmup: int = 3
    min_samples: int = 10
    min_rounds: int = 10
    round_seconds: float = 0.02  # candidate time per round: short kernels get more calls per round
    min_time: float = 0.5
    max_time: float = 10.0
    target_rel_stderr: float = 0.005
    # a speedup within this of 1.0 is called SAME whatever its CI: one run's CI does not see the
    # run-to-run spread (H200 A/A, 5 runs of 10 rounds: ratios 0.975-1.013, median 0.997)
    same_within: float = 0.015
    baselines: tuple[str, ...] = ("eager", "compile", "compile:max-autotune-no-cudagraphs")
    # "worker": each baseline in its own worker process, timed by the candidate's code (CUDA default);
    # "evaluator": in the evaluator process with the same loop (CPU default: no extra process start)
    baseline_process: str = "worker"
    flush: str = "write"  # how the L2 is evicted before a cold sample: write (zero a buffer) or read (timing.Flusher)
    recheck_elements: int = 1 << 20  # output elements re-checked per round (all when fewer)
    cpu_threads: int = 0  # CPU timings: torch threads on every side (0: torch's default); cpu: 1 (timing.cpu_threads)
    plausibility_tolerance: float = 0.1
    ceilings_cache: str | None = None
    gates_off: frozenset[str] = frozenset()  # recheck, tamper, plausibility, stability (tests only)
    # CPU: a round's wall time (seen from the evaluator) over n x the reported median sample; above
    # this the worker's samples cannot be what the calls cost (a clock faked inside the worker)
    wall_ratio_max: float = 10.0

    @classmethod
    def for_device(cls, device: str, **kw: Any) -> "TimingConfig":
        if device == "cpu":
            # CPU A/A runs (same function both sides, 3 rounds) gave 0.98-1.04 on the 2-core machine
            kw = {"min_time": 0.1, "max_time": 2.0, "min_rounds": 3, "baselines": ("eager",),
                  "baseline_process": "evaluator", "same_within": 0.05, "cpu_threads": 1, **kw}
        return cls(**kw)


def run_timing(task: Task, worker: Worker, device: str, secret: bytes, cfg: TimingConfig,
               cache_dir: Any = None) -> StageResult:
    t0 = time.monotonic()
    stage = StageResult(name="timing", status=Status.passed)
    env_start = clocks() if device == "cuda" else {}
    ceil_path = (cache_dir / "ceilings.json") if cache_dir is not None else None
    ceilings = roofline.load_or_measure(device, ceil_path) if ceil_path else roofline.measure_ceilings(device)
    shapes: list[dict[str, Any]] = []
    budget = Budget.for_device(device)
    flusher = Flusher(device, cfg.flush)
    null = null_escapes(device)
    l2 = reset_persisting_l2() if device == "cuda" else "n/a (cpu)"
    notes: list[str] = []
    threads = cfg.cpu_threads if device == "cpu" else 0
    sides: list[Side] = [WorkerSide("candidate", worker, flush=cfg.flush, threads=threads)]
    try:
        for w in task.workloads:
            dims = shrink_to(task, dict(w.dims), budget.max_elems)  # unchanged when it fits
            case = Case("timing", dims, task.dtypes[0], "normal", tuple("contiguous" for _ in task.inputs))
            if len(sides) == 1:  # baseline workers start once and serve every shape
                sides += baseline_sides(task, case, device, cfg.baselines, cfg.baseline_process, cfg.flush, flusher,
                                        cache_dir, notes, threads)
            try:
                shapes.append(_time_shape(task, case, w.weight, sides, device, secret, cfg, ceilings, stage, null,
                                          cache_dir))
            except WorkerDied as e:
                stage.findings.append(Finding(category=Category.robustness, rejects=True,
                                              message=f"candidate died while being timed: {e.message}"))
                break
            except BaselineFailed as e:  # not the candidate's fault: reported, the shape has no speedup
                stage.findings.append(Finding(category=Category.performance, message=f"{e} (shape {dims} not timed)"))
                for s in [s for s in sides if s.name == e.name]:
                    s.close()
                    sides.remove(s)
                continue
            if any(f.rejects for f in stage.findings):
                break
    finally:
        for s in sides:
            s.close()
    env_end = clocks() if device == "cuda" else {}
    stage.evidence = {"l2_persisting": l2, "null_escape_s": null[0], "device": device,
                      "timer": "cuda events, cold L2, blocking spin before each call" if device == "cuda"
                      else "cpu perf_counter",
                      "baseline_process": cfg.baseline_process, "flush": cfg.flush, "cpu_threads": threads,
                      "notes": sorted(set(notes)),
                      "shapes": shapes, "ceilings": {"copy_bandwidth": ceilings.copy_bandwidth,
                                                     "matmul_flops": ceilings.matmul_flops},
                      "clocks_start": env_start, "clocks_end": env_end}
    for name in cfg.baselines:
        vals = [(s["speedup"][name]["estimate"], s["weight"]) for s in shapes if name in s.get("speedup", {})]
        if vals:
            stage.evidence.setdefault("geomean_speedup", {})[name] = stats.weighted_geomean(
                [v for v, _ in vals], [wt for _, wt in vals])
    if env_start and env_end and env_end.get("sm_mhz", 0) < 0.9 * env_start.get("sm_mhz", 0):
        stage.findings.append(Finding(category=Category.performance, message=(
            f"SM clock dropped from {env_start['sm_mhz']:.0f} to {env_end['sm_mhz']:.0f} MHz during timing: "
            "measurement flagged")))
    stage.settle()
    stage.seconds = time.monotonic() - t0
    return stage


def _fresh_chunks(task: Task, inputs: list[Any], seed: int, max_elems: int = 1 << 18) -> list[tuple[int, int, Any]]:
    """New values for a random stretch of each floating input: the set the round's last call
    uses changes in place, so outputs cached by pointer go stale (and the recheck sees it)."""
    from assay.task.spec import REAL
    from assay.verify.inputs import make_values

    gen = torch.Generator().manual_seed(seed)
    out = []
    for i, x in enumerate(inputs):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.is_contiguous() and x.numel()):
            continue
        n = min(x.numel(), max_elems)
        off = int(torch.randint(0, x.numel() - n + 1, (1,), generator=gen))
        spec = task.inputs[i] if i < len(task.inputs) else None
        dom = spec.domain if spec is not None else None
        out.append((i, off, make_values((n,), x.dtype, dom or REAL, "normal", (), gen)))
    return out


def _round_value(times: list[float], escapes: list[float], null: tuple[float, float]) -> tuple[float, float]:
    """A round's time: the median sample, plus the work that escaped the timed stream beyond what an
    empty call's round trip shows (``null`` = median and p90 of empty calls measured in the same
    round). The excess is charged only when it stands out of the round trip's own jitter (3 us or
    twice its p90-p50 spread): charging jitter would bias every time upwards (seen on the H200: an
    identical kernel called 8% slower). Returns (value, excess)."""
    excess = statistics.median(escapes) - null[0] if escapes else 0.0
    charged = excess if excess > max(3e-6, 2 * (null[1] - null[0])) else 0.0
    return statistics.median(times) + charged, excess


def _side_failed(is_candidate: bool, name: str, when: str, r: dict[str, Any], stage: StageResult,
                 result: dict[str, Any]) -> dict[str, Any]:
    """A side's ``time`` request failed: the candidate is rejected (robustness), a baseline (trusted
    code, not the candidate's fault) raises ``BaselineFailed``."""
    if not is_candidate:
        raise BaselineFailed(name, f"baseline {name} failed {when}: {r.get('error')}")
    stage.findings.append(Finding(category=Category.robustness, rejects=True,
                                  message=f"candidate raised while timed: {r.get('error')}"))
    return result


def _time_shape(task: Task, case: Case, weight: float, sides: list[Side], device: str, secret: bytes,
                cfg: TimingConfig, ceilings: roofline.Ceilings, stage: StageResult,
                null: tuple[float, float] = (0.0, 0.0), cache_dir: Any = None) -> dict[str, Any]:
    first = make_inputs(task, replace(case, seed=derive_seed(secret, f"timing/{case.key()}/0")))
    set_bytes = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor))
    n_sets = max(2, min(cfg.sets, cfg.sets_bytes // max(set_bytes, 1)))  # big inputs: fewer sets to ship
    cases = [replace(case, seed=derive_seed(secret, f"timing/{case.key()}/{i}")) for i in range(n_sets)]
    sets = [first] + [make_inputs(task, c) for c in cases[1:]]
    ref0 = run_reference(task, cases[0], sets[0], device)  # whole: the roofline's output bytes, the init
    refs: dict[int, Any] = {}  # per round, the re-checked set's sampled reference
    for s in sides:
        s.stage(ref0.init, sets)
    cand = sides[0]
    result: dict[str, Any] = {"dims": case.dims, "weight": weight, "dtype": case.dtype, "sets": n_sets,
                              "warmup_s": {}, "block_s": {}}
    # warm-up (compilation, autotuning, first-call initialisation): excluded, its duration recorded
    for s in sides:
        w0 = time.monotonic()
        r = s.time(cfg.warmup, 0, None, None, calibrate=True)
        if not r.get("ok"):
            return _side_failed(s is cand, s.name, "in warm-up", r, stage, result)
        result["warmup_s"][s.name] = time.monotonic() - w0  # for compile: the compile time
        result["block_s"][s.name] = r.get("block_s")
    stops = {s.name: stats.AdaptiveStop(min_samples=cfg.min_samples, min_time=cfg.min_time, max_time=cfg.max_time,
                                        target_rel_stderr=cfg.target_rel_stderr) for s in sides}
    samples: dict[str, list[float]] = {s.name: [] for s in sides}
    rounds_v: dict[str, list[float]] = {s.name: [] for s in sides}  # one value per round: the pairs for the CI
    excess_v: list[float] = []
    wall_ratios: list[float] = []  # per round: outside wall time / (n x reported median)
    start_i, rounds, per_round = 0, 0, cfg.per_round
    t_start = time.monotonic()
    while rounds < cfg.min_rounds or not all(st.done for st in stops.values()):
        if rounds >= cfg.min_rounds and time.monotonic() - t_start > cfg.max_time:
            break
        last = (start_i + per_round - 1) % n_sets
        chunks = _fresh_chunks(task, sets[last], derive_seed(secret, f"timing/{case.key()}/round{rounds}"))
        for i, off, vals in chunks:
            sets[last][i].view(-1)[off:off + vals.numel()] = vals
        refresh = {"index": last, "chunks": [[i, off, v] for i, off, v in chunks]}
        seed = derive_seed(secret, f"timing/{case.key()}/sample{rounds}") % (1 << 62)
        # only the elements the re-check looks at come back from the device
        refs[last] = run_reference(task, cases[last], sets[last], device,
                                   select=lambda o, s=seed: sample_elements(o, cfg.recheck_elements, s))
        order = sides if rounds % 2 == 0 else sides[::-1]
        for s in order:
            e0 = time.perf_counter()
            sample = {"seed": seed, "k": cfg.recheck_elements} if s is cand and "recheck" not in cfg.gates_off else None
            r = s.time(per_round, start_i, refresh, sample)
            outside = time.perf_counter() - e0
            if not r.get("ok"):
                return _side_failed(s is cand, s.name, "while timed", r, stage, result)
            times = [float(t) for t in r["times"]]
            escapes = [float(e) for e in r.get("escapes") or [0.0] * len(times)]
            wnull = tuple(float(v) for v in (r.get("null_escape") or null))
            if s is cand:
                if not _candidate_round_ok(r, times, outside, refs[last], case, seed, cfg, stage, last, rounds):
                    return result
                wall_ratios.append(outside / max(len(times) * statistics.median(times), 1e-12))
                # the worker's own empty-call round trip, bounded so a forged value cannot hide work
                wnull = (min(wnull[0], 3 * null[0] + 5e-6), min(wnull[1], 3 * null[1] + 10e-6))
            value, excess = _round_value(times, escapes, wnull)  # type: ignore[arg-type]
            if s is cand:
                excess_v.append(excess)
            rounds_v[s.name].append(value)
            samples[s.name] += times
            for t in times:
                stops[s.name].add(t)
        start_i += per_round
        rounds += 1
        slowest = max(statistics.median(v) for v in rounds_v.values())
        per_round = min(200, max(cfg.per_round, int(cfg.round_seconds / max(slowest, 1e-7))))
    cname = cand.name
    result["candidate"] = _summary(samples[cname])
    result["candidate"]["round_median"] = statistics.median(rounds_v[cname])
    if device == "cpu" and wall_ratios:
        # Evaluator-side, so nothing the candidate patches in the worker can hide it: in its best round the
        # calls took far longer, by the evaluator's clock, than the samples the worker reported for them.
        result["wall_ratio"] = min(wall_ratios)
        if min(wall_ratios) > cfg.wall_ratio_max and "tamper" not in cfg.gates_off:
            stage.findings.append(Finding(category=Category.integrity, rejects=True, message=(
                f"reported times are {min(wall_ratios):.0f}x shorter than the wall time the calls took, seen from "
                f"outside, in every round at {case.dims}: the timer was tampered with")))
            return result
    if device == "cuda" and excess_v:
        excess = statistics.median(excess_v)
        result["escape_s"] = excess
        med = result["candidate"]["median"]
        if excess > max(10e-6, 0.1 * med) and "stability" not in cfg.gates_off:
            # small excesses are also what a synchronize's wake-up jitter looks like on tiny kernels
            # (seen on the H200: 8-14 us for a 2 us kernel): charged and reported, rejected only when large
            stage.findings.append(Finding(category=Category.integrity, rejects=excess > max(50e-6, 0.5 * med), message=(
                f"work escapes the timed stream at {case.dims}: {excess * 1e6:.1f} us run after the call's "
                "stream finished (side stream or background thread); charged to the candidate")))
    result["stop"] = {n: st.reason for n, st in stops.items()}
    result["rounds"] = rounds
    result["baselines"] = {s.name: {**_summary(samples[s.name]), "round_median": statistics.median(rounds_v[s.name])}
                           for s in sides[1:]}
    result["speedup"] = {}
    for s in sides[1:]:
        ci = stats.paired_speedup(rounds_v[s.name], rounds_v[cname], noise_floor=cfg.same_within)
        result["speedup"][s.name] = {"estimate": ci.estimate, "lo": ci.lo, "hi": ci.hi, "call": ci.call, "n": ci.n}
    _remember_baselines(task, case, device, result, cache_dir)
    _roofline(task, cases[0], sets[0], ref0, device, ceilings, result, cfg, stage)
    if device == "cuda":
        hr = cand.probe()
        result["hot_s"], result["hot_note"] = hr.get("hot_s"), hr.get("hot_note")
        kt = hr.get("kernel_s")
        result["profiler_kernel_s"], result["kernels"] = kt, hr.get("kernels")
        result["baseline_hot_s"] = {s.name: s.probe().get("hot_s") for s in sides[1:]}
        med = result["candidate"]["round_median"]
        if kt is not None and med > 20e-6 and abs(kt - med) / med > 0.5:
            stage.findings.append(Finding(category=Category.integrity, message=(
                f"profiler kernel time {kt * 1e6:.1f} us vs event time {med * 1e6:.1f} us at {case.dims}: "
                "large gap (work outside the candidate's kernels, or escaping the timed window)")))
    return result


def _remember_baselines(task: Task, case: Case, device: str, result: dict[str, Any], cache_dir: Any) -> None:
    """Baseline medians are cached per (task, shape, dtype, environment fingerprint). They are
    always measured live (the speedup pairs rounds); the cache gives each a drift figure against
    the last check on the same stack, so a noisy or throttled session shows up."""
    if cache_dir is None or not result.get("baselines"):
        return
    import hashlib
    import json

    from assay.measure.environment import environment

    env = environment(device)
    fp = "|".join(str(env.get(k)) for k in ("torch", "triton", "cuda", "gpu", "driver", "cpu"))
    key = hashlib.sha256(f"{task.source or task.name}|{sorted(case.dims.items())}|{case.dtype}|{fp}".encode()).hexdigest()[:24]
    path = Path(cache_dir) / "baselines.json"
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        data = {}
    prev = data.get(key, {})
    now = {n: b["round_median"] for n, b in result["baselines"].items()}
    result["baseline_drift"] = {n: now[n] / prev[n] for n in now if prev.get(n)}
    data[key] = now
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:
        pass


def _candidate_round_ok(r: dict[str, Any], times: list[float], outside: float, ref: Any, case: Case, seed: int,
                        cfg: TimingConfig, stage: StageResult, index: int, rnd: int) -> bool:
    """The evaluator's checks on one candidate round: wall clock, timer identity, output re-check."""
    if sum(times) > outside * 1.02 + 1e-4 and "tamper" not in cfg.gates_off:
        stage.findings.append(Finding(category=Category.integrity, rejects=True, message=(
            f"reported times ({sum(times):.4g} s) exceed the wall time seen from outside ({outside:.4g} s): "
            "the timer was tampered with")))
        return False
    if r.get("tampered") and "tamper" not in cfg.gates_off:
        stage.findings.append(Finding(category=Category.integrity, rejects=True,
                                      message=f"timing functions replaced by the candidate: {r['tampered']}"))
        return False
    bad = _recheck(r.get("output"), ref, case, seed, cfg.recheck_elements) if "recheck" not in cfg.gates_off else ""
    if bad:
        stage.findings.append(Finding(category=Category.integrity, rejects=True, message=(
            f"output computed inside the timing loop is wrong (set {index}, round {rnd}): {bad} — "
            "cached or replayed results?")))
        return False
    return True


def _summary(samples: list[float]) -> dict[str, Any]:
    s = stats.summarize(samples)
    return {"median": s.median, "mean": s.mean, "iqr": s.iqr, "p10": s.p10, "p90": s.p90, "n": s.n,
            "rel_stderr": s.rel_stderr, "outliers": s.n_outliers, "min": s.min, "max": s.max}


def _recheck(output: Any, ref: Any, case: Case, seed: int, k: int) -> str:
    """``ref`` holds the reference's elements at the sampled positions (``timing.sample``)."""
    outs = cmp.as_list(output)
    if len(outs) != len(ref.out64):
        return f"{len(outs)} outputs, expected {len(ref.out64)}"
    for o, r64, rd in zip(outs, ref.out64, ref.out_d):
        if not isinstance(rd, torch.Tensor):
            continue
        if not isinstance(o, torch.Tensor) or list(o.shape) != list(rd.shape):
            return "wrong output type or shape"
        c = cmp.compare(o, r64, cmp.calibrate(rd.dtype, r64, rd))
        if not c.ok:
            return c.message
    return ""


def _roofline(task: Task, case: Case, inputs: list[Any], ref: Any, device: str, ceilings: roofline.Ceilings,
              result: dict[str, Any], cfg: TimingConfig, stage: StageResult) -> None:
    dev_in = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    fn = local_fn(task, case, device, "eager")
    try:
        flops = roofline.count_flops(fn, dev_in)
    except Exception:  # noqa: BLE001
        flops = 0
    nbytes = roofline.min_bytes(dev_in, ref.out_d)
    floor = roofline.floor_time(flops, nbytes, ceilings, case.dtype)
    med = result["candidate"]["median"]
    result["roofline"] = {"flops": flops, "bytes": nbytes, "floor_s": floor,
                          "fraction": roofline.roofline_fraction(floor, med) if med > 0 else None}
    ok, msg = roofline.plausibility(floor, med, cfg.plausibility_tolerance)
    if not ok and device == "cuda" and "plausibility" not in cfg.gates_off:
        stage.findings.append(Finding(category=Category.integrity, rejects=True,
                                      message=f"implausible at {case.dims}: {msg}"))
