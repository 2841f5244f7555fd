"""The task contract: what a candidate must compute, over which inputs, to which tolerance.

A task is built either from a native task file (``assay.Task(...)`` bound to ``task``) or
from a KernelBench problem file; both loaders produce this one ``Task`` type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import torch

from assay.errors import TaskError

LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")
SPECIALS = ("nan", "inf")
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str | torch.dtype, where: str = "dtype") -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise TaskError(f"{where}: unknown dtype {name!r} (known: {', '.join(DTYPES)})")
    return DTYPES[name]


@dataclass(frozen=True)
class Dim:
    """A symbolic dimension and its legal range (inclusive)."""

    low: int = 1
    high: int = 1 << 16
    multiple_of: int = 1  # e.g. 8 when the contract only admits multiples of 8

    def __post_init__(self) -> None:
        if not (isinstance(self.low, int) and isinstance(self.high, int)):
            raise TaskError(f"Dim bounds must be integers, got {self.low!r}..{self.high!r}")
        if self.low < 0 or self.high < self.low:
            raise TaskError(f"Dim range {self.low}..{self.high} is empty or negative")
        if self.multiple_of < 1:
            raise TaskError(f"Dim multiple_of must be >= 1, got {self.multiple_of}")

    def legal(self, v: int) -> bool:
        return self.low <= v <= self.high and v % self.multiple_of == 0

    def clamp(self, v: int) -> int:
        v = min(max(v, self.low), self.high)
        v -= v % self.multiple_of
        return v if v >= self.low else self.low + (-self.low) % self.multiple_of


@dataclass(frozen=True)
class Domain:
    """Legal values of an input: an interval, optionally integer-valued."""

    low: float = -math.inf
    high: float = math.inf
    integer: bool = False

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise TaskError(f"Domain low {self.low} exceeds high {self.high}")

    @property
    def unbounded(self) -> bool:
        return math.isinf(self.low) and math.isinf(self.high)

    def describe(self) -> str:
        kind = "integers" if self.integer else "reals"
        if self.unbounded:
            return f"any {kind}"
        return f"{kind} in [{self.low}, {self.high}]"


REAL = Domain()
POSITIVE = Domain(1e-3, math.inf)
UNIT = Domain(0.0, 1.0)


@dataclass(frozen=True)
class Input:
    """One input of the reference, in call order."""

    name: str
    shape: tuple[str | int, ...]
    dtype: str | None = None  # None: the task's test dtype (floating inputs)
    domain: Domain = REAL
    layouts: tuple[str, ...] = ("contiguous",)
    special: tuple[str, ...] = ()  # special values whose behaviour the contract defines

    def __post_init__(self) -> None:
        for lay in self.layouts:
            if lay not in LAYOUTS:
                raise TaskError(f"input {self.name!r}: unknown layout {lay!r} (known: {', '.join(LAYOUTS)})")
        for sp in self.special:
            if sp not in SPECIALS:
                raise TaskError(f"input {self.name!r}: unknown special value {sp!r} (known: nan, inf)")
        if self.dtype is not None:
            parse_dtype(self.dtype, f"input {self.name!r}")


@dataclass(frozen=True)
class Workload:
    """A shape that matters in production, with its importance weight."""

    dims: dict[str, int]
    weight: float = 1.0


Tolerance = Literal["calibrate"] | dict[str, tuple[float, float]]


@dataclass
class Task:
    """A reference operation and its semantic contract.

    ``reference`` is a function of the inputs, or an ``nn.Module`` class constructed with
    ``init_inputs(dims)``. The candidate must define ``entry`` (a function with the
    reference's signature) or ``ModelNew`` (same constructor and forward as the module).
    """

    name: str
    reference: Callable[..., Any]
    inputs: Sequence[Input] = ()
    dims: dict[str, Dim] = field(default_factory=dict)
    workloads: Sequence[Workload] = ()
    dtypes: Sequence[str] = ("float32",)
    tolerance: Tolerance = "calibrate"
    mutates_inputs: bool = False
    entry: str | None = None
    init_inputs: Callable[[dict[str, int]], Sequence[Any]] | None = None
    input_factory: Callable[..., list[torch.Tensor]] | None = None
    description: str = ""
    # filled by loaders
    path: str = ""
    kind: str = "native"
    source: str = ""
    shape_fn: Callable[[dict[str, int]], list[tuple[int, ...]]] | None = None
    fixed_inputs_fn: Callable[[dict[str, int], int], dict[int, torch.Tensor]] | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TaskError("task name must be a non-empty string")
        if not callable(self.reference):
            raise TaskError("reference must be a function or an nn.Module class")
        self.inputs = tuple(self.inputs)
        self.workloads = tuple(self.workloads)
        self.dtypes = tuple(self.dtypes)
        for d in self.dtypes:
            parse_dtype(d, "dtypes")
        for inp in self.inputs:
            if not isinstance(inp, Input):
                raise TaskError(f"inputs must be assay.Input, got {type(inp).__name__}")
            for s in inp.shape:
                if isinstance(s, str) and s not in self.dims:
                    raise TaskError(f"input {inp.name!r}: shape uses undeclared dim {s!r}")
                if isinstance(s, int) and s < 0:
                    raise TaskError(f"input {inp.name!r}: negative size {s}")
        if not self.workloads:
            self.workloads = (Workload({k: d.clamp(max(d.low, 64)) for k, d in self.dims.items()}),)
        for w in self.workloads:
            missing = set(self.dims) - set(w.dims)
            if missing:
                raise TaskError(f"workload {w.dims} lacks dims {sorted(missing)}")
            for k, v in w.dims.items():
                if k not in self.dims:
                    raise TaskError(f"workload {w.dims} names unknown dim {k!r}")
                if not self.dims[k].legal(v):
                    raise TaskError(f"workload {w.dims}: {k}={v} outside its legal range")
            if w.weight <= 0:
                raise TaskError(f"workload {w.dims}: weight must be positive")
        if self.tolerance != "calibrate":
            if not isinstance(self.tolerance, dict):
                raise TaskError('tolerance must be "calibrate" or {dtype: (atol, rtol)}')
            for k, v in self.tolerance.items():
                parse_dtype(k, "tolerance")
                if not (isinstance(v, (tuple, list)) and len(v) == 2):
                    raise TaskError(f"tolerance for {k} must be (atol, rtol)")
        if self.is_module and self.init_inputs is None:
            self.init_inputs = lambda dims: ()

    # -- derived views -------------------------------------------------------------
    @property
    def is_module(self) -> bool:
        return isinstance(self.reference, type) and issubclass(self.reference, torch.nn.Module)

    @property
    def entry_name(self) -> str:
        if self.entry:
            return self.entry
        return "ModelNew" if self.is_module else getattr(self.reference, "__name__", "forward")

    def input_shapes(self, dims: dict[str, int]) -> list[tuple[int, ...]]:
        if self.shape_fn is not None:
            return self.shape_fn(dims)
        return [tuple(dims[s] if isinstance(s, str) else s for s in inp.shape) for inp in self.inputs]

    def input_dtype(self, index: int, test_dtype: torch.dtype) -> torch.dtype:
        spec = self.inputs[index]
        return parse_dtype(spec.dtype) if spec.dtype else test_dtype

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "entry": self.entry_name,
            "dims": {k: [d.low, d.high] for k, d in self.dims.items()},
            "workloads": [{"dims": w.dims, "weight": w.weight} for w in self.workloads],
            "dtypes": list(self.dtypes),
            "inputs": [
                {
                    "name": i.name,
                    "shape": list(i.shape),
                    "dtype": i.dtype,
                    "domain": i.domain.describe(),
                    "layouts": list(i.layouts),
                    "special": list(i.special),
                }
                for i in self.inputs
            ],
            "mutates_inputs": self.mutates_inputs,
            "notes": list(self.notes),
        }
