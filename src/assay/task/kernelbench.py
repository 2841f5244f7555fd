"""KernelBench problem files, read as they are (``Model``, ``get_inputs``, ``get_init_inputs``).

Dims: the module-level integer constants. A constant is a *shape dim* when changing it
changes the shape of an input that ``get_inputs()`` returns (probed on the meta device, so
no memory is touched); other constants (a reduction axis, a kernel size) stay fixed.
Shape dims are fuzzed over ``[1, 2 * default]``; a fuzzed shape the reference itself
rejects is skipped, not blamed on the candidate.

Value domain (per floating input): any real, unless the fp64 reference produces NaN on
standard-normal values where it produces none on the file's own inputs; then the domain
is the range the file's ``get_inputs()`` draws from (e.g. [0.001, 1] for ``torch.rand``).
Integer and boolean inputs keep the values ``get_inputs()`` draws (class indices and
masks have meanings assay cannot infer). A sidecar ``<problem>.assay.json`` overrides
any of this (see docs/task-format.md).
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from assay.errors import TaskError
from assay.task.modload import import_file, one_line
from assay.task.spec import Dim, Domain, Input, Task, Workload, dtype_name

PROBE_MAX_NUMEL = 1 << 22


class _Problem:
    """The loaded problem module with its constants rebindable."""

    def __init__(self, module: ModuleType, path: Path) -> None:
        self.module = module
        self.path = path
        self.defaults = {
            k: v
            for k, v in vars(module).items()
            if type(v) is int and not k.startswith("_") and k.isidentifier()
        }

    def _rebind(self, dims: dict[str, int]) -> None:
        for k, v in {**self.defaults, **dims}.items():
            setattr(self.module, k, v)

    def meta_inputs(self, dims: dict[str, int]) -> list[Any]:
        self._rebind(dims)
        try:
            with torch.device("meta"):
                return list(self.module.get_inputs())
        finally:
            self._rebind({})

    def real_inputs(self, dims: dict[str, int], seed: int) -> list[Any]:
        self._rebind(dims)
        try:
            torch.manual_seed(seed)
            return list(self.module.get_inputs())
        finally:
            self._rebind({})

    def init_inputs(self, dims: dict[str, int]) -> list[Any]:
        self._rebind(dims)
        try:
            return list(self.module.get_init_inputs())
        finally:
            self._rebind({})


def _shapes(inputs: list[Any]) -> list[tuple[int, ...]]:
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else () for x in inputs]


def load_kernelbench(path: Path, sidecar: Path | None = None) -> Task:
    module = import_file(path, TaskError)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise TaskError(f"KernelBench problem lacks `{name}`", str(path))
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        raise TaskError("`Model` is not an nn.Module class", str(path))
    prob = _Problem(module, path)
    try:
        default_inputs = prob.meta_inputs({})
    except Exception as e:
        raise TaskError(one_line(f"get_inputs() failed: {type(e).__name__}: {e}"), str(path)) from None
    if not default_inputs:
        raise TaskError("get_inputs() returned no inputs", str(path))
    base_shapes = _shapes(default_inputs)

    dims: dict[str, Dim] = {}
    for k, v in prob.defaults.items():
        if v < 1:
            continue
        try:
            changed = _shapes(prob.meta_inputs({k: v + 1})) != base_shapes
        except Exception:
            changed = False
        if changed:
            dims[k] = Dim(1, max(2 * v, 2))
    params = list(inspect.signature(module.Model.forward).parameters)[1:]
    inputs: list[Input] = []
    fixed_idx: list[int] = []
    for i, x in enumerate(default_inputs):
        name = params[i] if i < len(params) else f"input{i}"
        if not isinstance(x, torch.Tensor):
            raise TaskError(f"get_inputs() item {i} is a {type(x).__name__}, not a tensor", str(path))
        if x.dtype.is_floating_point:
            inputs.append(Input(name, tuple(x.shape)))
        else:
            inputs.append(Input(name, tuple(x.shape), dtype=dtype_name(x.dtype)))
            fixed_idx.append(i)
    float_dtypes = {x.dtype for x in default_inputs if x.dtype.is_floating_point}
    dtypes = tuple(dtype_name(d) for d in sorted(float_dtypes, key=str)) or ("float32",)

    def shape_fn(d: dict[str, int]) -> list[tuple[int, ...]]:
        return _shapes(prob.meta_inputs(d))

    def fixed_inputs_fn(d: dict[str, int], seed: int) -> dict[int, torch.Tensor]:
        if not fixed_idx:
            return {}
        real = prob.real_inputs(d, seed)
        return {i: real[i] for i in fixed_idx}

    task = Task(
        name=path.stem,
        reference=module.Model,
        inputs=inputs,
        dims=dims,
        workloads=(Workload({k: prob.defaults[k] for k in dims}),),
        dtypes=dtypes,
        entry="ModelNew",
        init_inputs=prob.init_inputs,
        path=str(path),
        kind="kernelbench",
        source=path.read_text(),
        shape_fn=shape_fn,
        fixed_inputs_fn=fixed_inputs_fn,
    )
    fixed = sorted(set(prob.defaults) - set(dims))
    if fixed:
        task.notes.append(f"constants held fixed (they do not change input shapes): {', '.join(fixed)}")
    _infer_domains(task, prob)
    if sidecar is not None and not sidecar.is_file():
        raise TaskError("no such sidecar file", str(sidecar))
    sidecar = sidecar or path.with_suffix(".assay.json")
    if sidecar.is_file():
        _apply_sidecar(task, sidecar)
    return task


def _probe_dims(task: Task) -> dict[str, int]:
    """Small dims for probing the reference: each default shrunk while the reference runs."""
    default = dict(task.workloads[0].dims)
    small = {k: min(v, 16) for k, v in default.items()}
    return small


def _infer_domains(task: Task, prob: _Problem) -> None:
    candidates = [_probe_dims(task), dict(task.workloads[0].dims)]
    for dims in candidates:
        try:
            shapes = task.input_shapes(dims)
            if sum(math.prod(s) for s in shapes) > PROBE_MAX_NUMEL:
                continue
            inputs = prob.real_inputs(dims, seed=0)
            torch.manual_seed(0)
            model = task.reference(*prob.init_inputs(dims)).double()
            with torch.no_grad():
                base = _has_nan(model(*[_f64(x) for x in inputs]))
        except Exception:
            continue
        new_inputs = list(task.inputs)
        for i, x in enumerate(inputs):
            if not (isinstance(x, torch.Tensor) and x.dtype.is_floating_point):
                continue
            trial = list(inputs)
            trial[i] = torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=x.dtype)
            try:
                with torch.no_grad():
                    nan = _has_nan(model(*[_f64(t) for t in trial]))
            except Exception:
                nan = True
            if nan and not base:
                lo, hi = float(x.min()), float(x.max())
                lo = max(lo, 1e-3) if lo >= 0 else lo
                dom = Domain(lo, max(hi, lo))
                new_inputs[i] = Input(task.inputs[i].name, task.inputs[i].shape, domain=dom)
                task.notes.append(
                    f"input {task.inputs[i].name}: reference gives NaN on real values; "
                    f"domain inferred as {dom.describe()} from get_inputs()"
                )
        task.inputs = tuple(new_inputs)
        return
    task.notes.append("value domain could not be probed; assuming any real")


def _has_nan(out: Any) -> bool:
    outs = out if isinstance(out, (tuple, list)) else [out]
    return any(isinstance(o, torch.Tensor) and o.is_floating_point() and bool(o.isnan().any()) for o in outs)


def _f64(x: Any) -> Any:
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def _apply_sidecar(task: Task, sidecar: Path) -> None:
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
        raise TaskError(f"invalid JSON: {e}", str(sidecar)) from None
    if not isinstance(data, dict):
        raise TaskError("sidecar must be a JSON object", str(sidecar))
    try:
        for section in ("inputs", "dims"):
            if not isinstance(data.get(section) or {}, dict):
                raise TaskError(f"sidecar {section!r} must be a JSON object")
        inputs = list(task.inputs)
        for key, spec in (data.get("inputs") or {}).items():
            idx = next((i for i, inp in enumerate(inputs) if inp.name == key or str(i) == key), None)
            if idx is None:
                raise TaskError(f"sidecar names unknown input {key!r}")
            if not isinstance(spec, dict):
                raise TaskError(f"sidecar input {key!r} must be a JSON object")
            old = inputs[idx]
            dom = spec.get("domain")
            inputs[idx] = Input(
                old.name,
                old.shape,
                dtype=old.dtype,
                domain=Domain(float(dom[0]), float(dom[1])) if dom else old.domain,
                layouts=_names(spec.get("layouts", old.layouts)),
                special=_names(spec.get("special", old.special)),
            )
        task.inputs = tuple(inputs)
        for k, rng in (data.get("dims") or {}).items():
            if k not in task.dims:
                raise TaskError(f"sidecar names unknown dim {k!r}")
            task.dims[k] = Dim(int(rng[0]), int(rng[1]))
        if "workloads" in data:
            task.workloads = tuple(Workload(dict(w["dims"]), float(w.get("weight", 1.0))) for w in data["workloads"])
        if "tolerance" in data:
            task.tolerance = data["tolerance"]
        if "mutates_inputs" in data:
            task.mutates_inputs = bool(data["mutates_inputs"])
        task.__post_init__()
    except TaskError as e:
        raise e.at(str(sidecar)) from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise TaskError(f"malformed sidecar: {type(e).__name__}: {e}", str(sidecar)) from None
    task.notes.append(f"sidecar applied: {sidecar.name}")


def _names(value: Any) -> tuple[str, ...]:
    """A list of names from the sidecar; a lone string is one name, not its characters."""
    return (value,) if isinstance(value, str) else tuple(value)
