"""What the timing stage times: a side is the candidate's worker, a baseline's own worker, or
(for a task without a source file, and on the CPU) a baseline function in the evaluator. Every
side is timed by the same loop (``timing.cold_samples``) and answers ``time`` requests alike."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import torch

from assay.measure.baselines import baseline_source, compile_mode
from assay.measure.timing import Flusher, block_for, cold_samples, cpu_threads, null_escapes
from assay.sandbox.process import Worker, WorkerDied
from assay.task.spec import Task, parse_dtype
from assay.verify.cases import Case
from assay.verify.reference import init_for


class Side:
    """Something timed: the candidate's worker, a baseline's worker, or a local function."""

    name: str

    def stage(self, init: Any, sets: list[list[Any]]) -> None: ...
    def time(self, n: int, start: int, refresh: dict[str, Any] | None, sample: dict[str, int] | None,
             calibrate: bool = False) -> dict[str, Any]: ...
    def probe(self) -> dict[str, Any]:
        return {}
    def close(self) -> None: ...


class BaselineFailed(Exception):
    """A baseline (trusted code) failed: the measurement is incomplete, the candidate is not at fault."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class WorkerSide(Side):
    def __init__(self, name: str, worker: Worker, own: bool = False, flush: str = "write", threads: int = 0) -> None:
        self.name, self.worker, self.own = name, worker, own  # own: a baseline's worker
        self.flush, self.threads = flush, threads

    def _request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            resp = self.worker.request(msg, timeout)
        except WorkerDied as e:
            if self.own:
                raise BaselineFailed(self.name, f"baseline {self.name}: {e.message}") from e
            raise
        if self.own and not resp.get("ok"):
            raise BaselineFailed(self.name, f"baseline {self.name} failed ({msg['op']}): {resp.get('error')}")
        return resp

    def stage(self, init: Any, sets: list[list[Any]]) -> None:
        resp = self._request({"op": "stage", "init": init, "sets": sets}, 300)
        if not resp.get("ok"):
            raise WorkerDied("crash", f"staging inputs for {self.name} failed: {resp.get('error')}")

    def time(self, n: int, start: int, refresh: dict[str, Any] | None, sample: dict[str, int] | None,
             calibrate: bool = False) -> dict[str, Any]:
        return self._request({"op": "time", "n": n, "start": start, "refresh": refresh, "sample": sample,
                              "calibrate": calibrate, "flush": self.flush, "threads": self.threads}, 600)

    def probe(self) -> dict[str, Any]:  # baselines: the hot number only (no profiler start-up)
        return self._request({"op": "probe", "what": "hot" if self.own else "hot_and_profile"}, 300)

    def close(self) -> None:
        if self.own:
            self.worker.close()


class LocalSide(Side):
    """A baseline timed in the evaluator (trusted code) with the same loop as the workers."""

    def __init__(self, name: str, fn: Callable[..., Any], device: str, flusher: Flusher, threads: int = 0) -> None:
        self.name, self.fn, self.device, self.flusher, self.threads = name, fn, device, flusher, threads
        self.sets: list[list[Any]] = []
        self.block_s = 0.0
        self.null = null_escapes(device)

    def stage(self, init: Any, sets: list[list[Any]]) -> None:
        self.sets = [[x.to(self.device) if isinstance(x, torch.Tensor) else x for x in s] for s in sets]

    def time(self, n: int, start: int, refresh: dict[str, Any] | None, sample: dict[str, int] | None,
             calibrate: bool = False) -> dict[str, Any]:
        with torch.no_grad(), cpu_threads(self.threads):
            if refresh:
                for i, off, vals in refresh["chunks"]:
                    t = self.sets[refresh["index"]][i]
                    t.view(-1)[off:off + vals.numel()] = vals.to(t.device)
            if calibrate:
                self.block_s = block_for(self.fn, self.sets, self.device)
            t, e, _ = cold_samples(self.fn, self.sets, n, self.device, self.flusher, start, self.block_s)
        return {"ok": True, "times": t, "escapes": e, "null_escape": list(self.null), "block_s": self.block_s}


def local_fn(task: Task, case: Case, device: str, name: str) -> Callable[..., Any]:
    """A baseline callable in the evaluator: the reference in the test dtype, maybe compiled."""
    dtype = parse_dtype(case.dtype)
    init = init_for(task, case)
    if init is not None:
        torch.manual_seed(init["seed"])
        eager: Callable[..., Any] = task.reference(*init["args"]).to(device=device, dtype=dtype)
    else:
        eager = task.reference
    if name == "eager":
        return eager
    return torch.compile(copy.deepcopy(eager) if isinstance(eager, torch.nn.Module) else eager, mode=compile_mode(name),
                         dynamic=False)  # specialised per shape, as baselines.baseline_source


def baseline_sides(task: Task, case: Case, device: str, names: tuple[str, ...], process: str, flush: str,
                   flusher: Flusher, cache_dir: Path | None, notes: list[str], threads: int = 0) -> list[Side]:
    """One side per baseline: its own worker (``process="worker"``, when the task has a source
    file and it loads), else the evaluator; every fallback is noted."""
    sides: list[Side] = []
    for name in names:
        src = baseline_source(task, name, case.dtype) if process == "worker" else None
        if src is None:
            if process == "worker":
                notes.append(f"{name}: the task has no source file; timed in the evaluator process")
            sides.append(LocalSide(name, local_fn(task, case, device, name), device, flusher, threads))
            continue
        env = {"ASSAY_PREIMPORT": "triton"} if name.startswith("compile") else {}
        if cache_dir is not None and name.startswith("compile"):
            env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cache_dir) / "triton" / "inductor")
        w = Worker(device=device, cache_dir=cache_dir, extra_env=env)
        w.start()
        staged = w.stage_source(src)
        resp = w.request({"op": "load", "path": str(staged), "entry": task.entry_name, "fallback_entry": "ModelNew",
                          "device": device}, 600)
        if not resp.get("ok"):
            w.close()
            notes.append(f"{name}: baseline worker failed to load ({resp.get('error')}); timed in the evaluator")
            sides.append(LocalSide(name, local_fn(task, case, device, name), device, flusher, threads))
            continue
        sides.append(WorkerSide(name, w, own=True, flush=flush, threads=threads))
    return sides
