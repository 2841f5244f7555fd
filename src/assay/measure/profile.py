"""The profile stage (``--profile``): Nsight Compute speed-of-light metrics and a bottleneck class.

The candidate runs in a fresh worker started under ``ncu --profile-from-start off`` (inside the
same sandbox: ncu is the launcher in front of python); the worker warms up and makes one call
between cudaProfilerStart/Stop, so only that call's kernels are profiled. Per kernel: duration,
DRAM and SM throughput (% of peak), achieved occupancy and the top warp-stall reasons; the stage
reports the duration-weighted figures and a class:

- ``memory``  — DRAM throughput >= 60% of peak and above the SM throughput;
- ``compute`` — SM throughput >= 60% of peak and above the DRAM throughput;
- ``latency`` — neither reaches 60%: the kernel waits (launch, occupancy, dependencies).

It is evidence for a generator (what to fix next), never a reason to reject.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assay.verdict import StageResult, Status

DURATION = "gpu__time_duration.sum"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "membar", "math_pipe_throttle", "mio_throttle",
          "lg_throttle", "wait", "not_selected", "no_instruction", "dispatch_stall", "drain", "imc_miss",
          "branch_resolving", "sleeping", "tex_throttle", "selected")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
CORE = (DURATION, DRAM, SM, OCCUPANCY)
METRICS = (*CORE, *(STALL_METRIC.format(s) for s in STALLS))
BOUND = 60.0  # % of peak above which a unit is the bottleneck


@dataclass
class KernelProfile:
    name: str
    duration_s: float
    dram_pct: float
    sm_pct: float
    occupancy_pct: float | None
    stalls: dict[str, float] = field(default_factory=dict)


def ncu_path() -> str | None:
    return shutil.which("ncu")


def ncu_command(log_file: str, metrics: tuple[str, ...] = METRICS) -> tuple[str, ...]:
    exe = ncu_path() or "ncu"
    return (exe, "--profile-from-start", "off", "--target-processes", "all", "--csv", "--page", "raw",
            "--metrics", ",".join(metrics), "--log-file", log_file)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_csv(text: str) -> list[KernelProfile]:
    """Kernels from ``ncu --csv --page raw`` output (one row per kernel, a units row after the
    header) or from the details page (one row per metric). Lines ncu itself prints (``==PROF==``,
    warnings) are skipped."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    if "Metric Name" in header:  # details page: long format
        kn, mn, mu, mv = (header.index(c) for c in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
        ids = header.index("ID") if "ID" in header else kn
        per: dict[str, dict[str, Any]] = {}
        for r in rows[1:]:
            if len(r) <= max(kn, mn, mu, mv):
                continue
            k = per.setdefault(r[ids], {"name": r[kn]})
            k[r[mn]] = (_number(r[mv]), r[mu])
        kernels = [{"name": d.pop("name"), **d} for d in per.values()]
    else:  # raw page: wide format, the row after the header holds the units
        units = rows[1] if len(rows) > 1 and rows[1] and rows[1][0] == "" else None
        body = rows[2:] if units else rows[1:]
        kn = header.index("Kernel Name")
        kernels = []
        for r in body:
            if len(r) != len(header):
                continue
            d: dict[str, Any] = {"name": r[kn]}
            for i, h in enumerate(header):
                if h in METRICS:
                    d[h] = (_number(r[i]), units[i] if units else "")
            kernels.append(d)
    return [k for k in (_kernel(d) for d in kernels) if k is not None]


def _seconds(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
             "s": 1.0, "second": 1.0}.get(unit.strip().lower(), 1e-9)  # ncu's default unit is ns
    return value * scale


def _kernel(d: dict[str, Any]) -> KernelProfile | None:
    dur = _seconds(*d.get(DURATION, (None, "")))
    dram, sm = d.get(DRAM, (None, ""))[0], d.get(SM, (None, ""))[0]
    if dur is None or dram is None or sm is None:
        return None
    stalls = {s: v for s in STALLS if (v := d.get(STALL_METRIC.format(s), (None, ""))[0]) is not None}
    return KernelProfile(d["name"], dur, dram, sm, d.get(OCCUPANCY, (None, ""))[0], stalls)


def classify(dram_pct: float, sm_pct: float) -> str:
    if dram_pct >= BOUND and dram_pct >= sm_pct:
        return "memory"
    if sm_pct >= BOUND:
        return "compute"
    return "latency"


def summarize(kernels: list[KernelProfile], top: int = 3) -> dict[str, Any]:
    """Duration-weighted speed-of-light figures over the profiled call, its class and top stalls."""
    total = sum(k.duration_s for k in kernels)
    if not kernels or total <= 0:
        return {"kernels": 0, "bottleneck": None}

    def wavg(values: list[tuple[float | None, float]]) -> float | None:
        pairs = [(v, w) for v, w in values if v is not None]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    dram = wavg([(k.dram_pct, k.duration_s) for k in kernels]) or 0.0
    sm = wavg([(k.sm_pct, k.duration_s) for k in kernels]) or 0.0
    stalls: dict[str, float] = {}
    for k in kernels:
        for s, v in k.stalls.items():
            stalls[s] = stalls.get(s, 0.0) + v * k.duration_s / total
    return {
        "kernels": len(kernels), "duration_s": total, "dram_pct": dram, "sm_pct": sm,
        "occupancy_pct": wavg([(k.occupancy_pct, k.duration_s) for k in kernels]),
        "bottleneck": classify(dram, sm),
        "top_stalls": [s for s, _ in sorted(stalls.items(), key=lambda kv: -kv[1])[:top]],
        "per_kernel": [{"name": k.name[:120], "duration_s": k.duration_s, "dram_pct": k.dram_pct,
                        "sm_pct": k.sm_pct, "occupancy_pct": k.occupancy_pct} for k in kernels[:10]],
    }


def run_profile(task: Any, source: str, entry: str, device: str, secret: bytes, cache_dir: Path | None,
                extra_env: dict[str, str] | None = None, timeout: float = 600.0) -> StageResult:
    """Profile one call of the candidate at the task's first workload shape (see the module doc).
    A toolkit whose ncu lacks a stall metric rejects the whole list: then the core metrics alone."""
    first = _profile_once(task, source, entry, device, secret, cache_dir, extra_env, timeout, METRICS)
    if first.status is not Status.warning or "no kernels" not in str(first.evidence.get("reason")):
        return first
    second = _profile_once(task, source, entry, device, secret, cache_dir, extra_env, timeout, CORE)
    second.evidence["note"] = "stall metrics unavailable: core metrics only"
    return second


def _profile_once(task: Any, source: str, entry: str, device: str, secret: bytes, cache_dir: Path | None,
                  extra_env: dict[str, str] | None, timeout: float, metrics: tuple[str, ...]) -> StageResult:
    from assay.sandbox.process import Worker, WorkerDied
    from assay.verify.cases import Case, derive_seed
    from assay.verify.inputs import make_inputs
    from assay.verify.reference import init_for

    t0 = time.monotonic()
    stage = StageResult(name="profile", status=Status.skipped)
    if device != "cuda":
        stage.evidence = {"reason": "the profile stage needs a CUDA device (ncu)"}
        return stage
    if ncu_path() is None:
        stage.evidence = {"reason": "ncu (Nsight Compute CLI) not found on PATH"}
        return stage
    w = task.workloads[0]
    case = Case("profile", dict(w.dims), task.dtypes[0], "normal", tuple("contiguous" for _ in task.inputs))
    case = replace(case, seed=derive_seed(secret, "profile"))
    worker = Worker(device=device, cache_dir=cache_dir, extra_env=dict(extra_env or {}))
    worker.wrap = ncu_command("ncu.csv", metrics)  # relative: ncu runs in the worker's own directory
    log = ""
    try:
        worker.start()
        staged = worker.stage_source(source)
        steps = ({"op": "load", "path": str(staged), "entry": entry, "fallback_entry": "ModelNew", "device": device},
                 {"op": "stage", "init": init_for(task, case), "sets": [make_inputs(task, case)]},
                 {"op": "profile_call", "warmup": 3})
        for req in steps:
            resp = worker.request(req, timeout)
            if not resp.get("ok"):
                stage.status = Status.warning
                stage.evidence = {"reason": f"profile run failed at {req['op']}: {str(resp.get('error'))[:300]}"}
                return stage
        # ncu prints its results when the profiled process exits: ask the worker to exit, then wait
        worker.send({"op": "exit"}, 30)
        if worker.proc is not None:
            worker.proc.wait(timeout=timeout)
        path = worker.tmp / "ncu.csv" if worker.tmp else None
        log = path.read_text(errors="replace") if path and path.exists() else ""
    except (WorkerDied, subprocess.TimeoutExpired) as e:
        stage.status = Status.warning
        stage.evidence = {"reason": f"profile worker died: {getattr(e, 'message', e)}",
                          "output": str(getattr(e, "output", "") or "")[-1500:]}
        return stage
    finally:
        worker.close()
        stage.seconds = time.monotonic() - t0
    kernels = parse_csv(log)
    if not kernels:
        stage.status = Status.warning
        stage.evidence = {"reason": "ncu reported no kernels (profiling permission, or no kernel ran)",
                          "ncu_output": log[-1500:]}
        return stage
    stage.status = Status.passed
    stage.evidence = {"dims": case.dims, **summarize(kernels)}
    return stage


def roofline_bottleneck(timing_evidence: dict[str, Any]) -> dict[str, Any]:
    """A coarser class from the timing stage when ncu cannot run (no counters, no GPU): per shape,
    achieved bandwidth and FLOP rate as % of the measured device ceilings, then ``classify``.
    Weighted by each shape's weight; marked with its source."""
    ceil = timing_evidence.get("ceilings") or {}
    bw = ceil.get("copy_bandwidth") or 0.0
    rates = ceil.get("matmul_flops") or {}
    rows = []
    for s in timing_evidence.get("shapes") or []:
        med = (s.get("candidate") or {}).get("median")
        roof = s.get("roofline") or {}
        if not med or not bw:
            continue
        rate = rates.get(s.get("dtype", "float32")) or rates.get("float32") or 0.0
        mem = 100.0 * roof.get("bytes", 0) / med / bw
        comp = 100.0 * roof.get("flops", 0) / med / rate if rate else 0.0
        rows.append((mem, comp, float(s.get("weight", 1.0))))
    if not rows:
        return {}
    w = sum(r[2] for r in rows)
    mem = sum(r[0] * r[2] for r in rows) / w
    comp = sum(r[1] * r[2] for r in rows) / w
    return {"bottleneck": classify(mem, comp), "dram_pct": mem, "sm_pct": comp, "occupancy_pct": None,
            "top_stalls": [], "source": "roofline (achieved bandwidth and FLOP rate vs measured ceilings; ncu unavailable)"}
