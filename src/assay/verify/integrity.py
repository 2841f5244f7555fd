"""Integrity stage: what the candidate actually executed, per workload shape.

A ``TorchDispatchMode`` records every aten operation one call runs (in the worker); the same
is done for the reference (here, trusted). Operations that only allocate, view, copy or fill
are "plumbing"; the rest are "compute". Per workload shape the path is:

- ``reference-op fallback`` when the candidate ran one of the reference's own compute ops;
- ``torch ops`` when it ran other aten compute ops (work done by library operations);
- ``custom kernel`` when no aten compute op ran (the work was in Triton / CUDA / C++ code).

The candidate is an *existing primitive* unless some shape ran a custom kernel; with
``require_custom_kernel`` such a candidate is rejected (category integrity). A specialization
with a correct fallback is legitimate: the weighted fraction of workload shapes that took a
fallback path is reported.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from assay.sandbox.process import Worker, WorkerDied
from assay.task.spec import Task
from assay.verdict import Category, Finding, StageResult, Status
from assay.verify.cases import Budget, Case, derive_seed, shrink_to
from assay.verify.inputs import make_inputs
from assay.verify.reference import init_for

PLUMBING = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill", "fill_", "zero_", "view",
    "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "contiguous", "clone",
    "copy", "copy_", "_to_copy", "to", "detach", "alias", "select", "slice", "unsqueeze", "squeeze", "lift_fresh",
    "unbind", "split", "split_with_sizes", "chunk", "narrow", "stride", "size", "numel", "set_", "resize_",
    "arange", "_local_scalar_dense", "item", "is_same_size", "record_stream", "view_as_real", "view_as_complex",
    "unfold", "flatten", "_reshape_alias", "lift", "_has_compatible_shallow_copy_type", "scalar_tensor",
}


class _Recorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Not wrapping __torch_dispatch__ in torch._dynamo.disable: that wrapper imports
        # torch._dynamo (~2.5 s) on the first recorded op. Dynamo never compiles while a dispatch
        # mode is on the stack (it runs the frame eagerly), so what is recorded is unchanged.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def compute_ops(ops: list[str]) -> set[str]:
    return {o.rstrip("_") for o in ops if o not in PLUMBING and o.rstrip("_") not in PLUMBING}


def reference_ops(task: Task, case: Case, inputs: list[Any], device: str) -> set[str]:
    init = init_for(task, case)
    fn: Any = task.reference
    if init is not None:
        torch.manual_seed(init["seed"])
        fn = task.reference(*init["args"]).to(device)
    rec = _Recorder()
    with torch.no_grad(), rec:
        fn(*[x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs])
    return compute_ops(rec.ops)


def run_integrity(task: Task, worker: Worker, device: str, secret: bytes, language: str,
                  require_custom_kernel: bool) -> StageResult:
    import time

    t0 = time.monotonic()
    stage = StageResult(name="integrity", status=Status.passed)
    shapes, fallback_w, total_w = [], 0.0, 0.0
    contig = tuple("contiguous" for _ in task.inputs)
    for w in task.workloads:
        dims = shrink_to(task, dict(w.dims), Budget.for_device(device).max_elems)
        case = Case("trace", dims, task.dtypes[0], "normal", contig)
        case = Case(case.kind, dims, case.dtype, "normal", contig, seed=derive_seed(secret, "trace/" + case.key()))
        inputs = make_inputs(task, case)
        ref = reference_ops(task, case, inputs, device)
        try:
            resp = worker.request({"op": "trace", "init": init_for(task, case), "inputs": inputs}, 600)
        except WorkerDied as e:
            stage.findings.append(Finding(category=Category.robustness, rejects=True,
                                          message=f"candidate died while traced: {e.message}"))
            stage.status = Status.failed
            return stage
        if not resp.get("ok"):
            stage.evidence["trace_error"] = resp.get("error")
            continue
        cand = compute_ops(resp.get("ops") or [])
        if cand & ref:
            path = "reference-op fallback"
        elif cand:
            path = "torch ops"
        else:
            path = "custom kernel"
        shapes.append({"dims": dims, "weight": w.weight, "path": path, "candidate_compute_ops": sorted(cand)[:20],
                       "reference_compute_ops": sorted(ref)[:20]})
        total_w += w.weight
        fallback_w += w.weight if path != "custom kernel" else 0.0
    custom = any(s["path"] == "custom kernel" for s in shapes) and language != "torch"
    label = "custom kernel" if custom else "existing primitive"
    stage.evidence = {"label": label, "shapes": shapes,
                      "fallback_weight_fraction": (fallback_w / total_w) if total_w else None}
    if custom and fallback_w:
        stage.findings.append(Finding(category=Category.integrity, message=(
            f"{fallback_w / total_w:.0%} of workload weight runs a fallback path "
            f"({', '.join(s['path'] for s in shapes if s['path'] != 'custom kernel')})")))
    if not custom and require_custom_kernel:
        why = "plain torch" if language == "torch" else "its work is done by torch library operations"
        stage.findings.append(Finding(category=Category.integrity, rejects=True, message=(
            f"no custom kernel ran: {why} (an existing primitive; pass --allow-primitive to accept it)")))
    stage.settle()
    stage.seconds = time.monotonic() - t0
    return stage
