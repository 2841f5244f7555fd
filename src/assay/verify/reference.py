"""The reference, run only in the trusted evaluator: in fp64 (the oracle) and in the test dtype
(to calibrate tolerances and to learn the expected output dtypes and shapes)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from assay.task.spec import Task, parse_dtype
from assay.verify.cases import Case
from assay.verify.compare import as_list


@dataclass
class RefResult:
    out64: list[Any]  # fp64 outputs (exact dtypes kept), on CPU
    out_d: list[Any]  # the reference in the test dtype, on CPU
    init: dict[str, Any] | None  # what the candidate's ModelNew is constructed with
    is_tuple: bool = False  # the reference returns a tuple/list (not a bare tensor)


class ReferenceError_(Exception):
    """The reference itself rejected this case (an illegal shape): skip, don't blame."""


def init_for(task: Task, case: Case) -> dict[str, Any] | None:
    if not task.is_module:
        return None
    assert task.init_inputs is not None
    return {"seed": case.seed % (1 << 31), "args": list(task.init_inputs(case.dims))}


def run_reference(task: Task, case: Case, inputs: list[Any], device: str,
                  select: Any = None) -> RefResult:
    """``select``: applied to every output tensor on the device before it is copied back (the
    timing stage keeps only the elements it re-checks, not a whole fp64 output per round)."""
    init = init_for(task, case)
    dtype = parse_dtype(case.dtype)
    try:
        if init is not None:
            torch.manual_seed(init["seed"])
            model = task.reference(*init["args"])
            ref64_fn = copy.deepcopy(model).to(device=device, dtype=torch.float64)
            ref_d_fn = model.to(device=device, dtype=dtype) if dtype.is_floating_point else model.to(device)
        else:
            ref64_fn = ref_d_fn = task.reference
        with torch.no_grad():
            x64 = [_f64(x, device) for x in inputs]
            raw64 = ref64_fn(*x64)
            pick = select if select is not None else (lambda o: o)
            out64 = [_cpu(pick(o) if isinstance(o, torch.Tensor) else o) for o in as_list(raw64)]
            xd = [x.to(device).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            out_d = [_cpu(pick(o) if isinstance(o, torch.Tensor) else o) for o in as_list(ref_d_fn(*xd))]
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        raise ReferenceError_(f"{type(e).__name__}: {e}") from None
    return RefResult(out64, out_d, init, isinstance(raw64, (tuple, list)))


def _f64(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.double() if x.is_floating_point() else x.clone()
    return x


def _cpu(o: Any) -> Any:
    return o.detach().cpu() if isinstance(o, torch.Tensor) else o
