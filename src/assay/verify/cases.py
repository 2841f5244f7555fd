"""The plan of correctness cases for one task: operation-aware, ordered by what catches most.

Order: workload shapes; boundary dims (1, small primes, sizes one off powers of two and
off common block sizes, the largest the device affords); every permitted non-contiguous
layout; each value class over each input's domain; special values where defined; then
random shapes until the time budget runs out. Seeds come from a per-evaluation secret.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field, replace
from typing import Iterator

from assay.task.spec import Task

VALUE_CLASSES = ("normal", "uniform", "large", "repeated", "constant_rows", "zeros")
# how "simple" a failing value class is, for the minimal failing case (lower = simpler)
SIMPLICITY = {"normal": 0, "uniform": 1, "zeros": 2, "constant_rows": 3, "repeated": 4, "large": 5, "special": 6}
SMALL = (1, 2, 3, 5, 7, 13, 17, 31)
BLOCKS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
OTHER_CPU = 3  # the other dims' size in a CPU boundary case


@dataclass(frozen=True)
class Budget:
    """Sizes a device affords: total input elements per case."""

    max_elems: int  # the largest case (workloads, "largest" boundary)
    base_elems: int  # typical fuzz cases

    @classmethod
    def for_device(cls, device: str) -> "Budget":
        return cls(1 << 20, 1 << 12) if device == "cpu" else cls(1 << 28, 1 << 20)


@dataclass(frozen=True)
class Case:
    kind: str  # workload | boundary | largest | layout | values | special | random | shrink
    dims: dict[str, int]
    dtype: str
    values: str
    layouts: tuple[str, ...]  # one per input
    seed: int = 0
    weight: float = 0.0
    note: str = ""
    rep: int = 0  # > 0: the same shape again with fresh values (catches caching by shape)

    def key(self) -> str:
        d = ",".join(f"{k}={v}" for k, v in self.dims.items())
        vals = f"{self.values}#{self.rep}" if self.rep else self.values
        return f"{self.dtype}/{d}/{vals}/{'+'.join(self.layouts)}"

    def token(self) -> str:
        """Everything needed to replay this case: ``assay check --replay TOKEN``."""
        return f"{self.key()}/seed={self.seed}"

    @classmethod
    def from_token(cls, token: str) -> "Case":
        try:
            dtype, dims, values, layouts, seed = token.split("/")
            dd = {k: int(v) for k, v in (p.split("=") for p in dims.split(",") if p)}
            values, _, rep = values.partition("#")
            return cls("replay", dd, dtype, values, tuple(layouts.split("+")), int(seed.removeprefix("seed=")),
                       rep=int(rep or 0))
        except ValueError:
            raise ValueError(f"malformed replay token {token!r}") from None


@dataclass
class Plan:
    cases: list[Case]
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        return [f"{i:3d} {c.kind:9s} {c.key()} {c.note}".rstrip() for i, c in enumerate(self.cases)]


def derive_seed(secret: bytes, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(secret + key.encode(), digest_size=8).digest(), "little") >> 1


def boundary_values(low: int, high: int, multiple_of: int = 1) -> list[int]:
    vals = set(SMALL) | {low, low + 1}
    for b in BLOCKS:
        vals |= {b - 1, b + 1}
    vals = {v for v in vals if low <= v <= high and v % multiple_of == 0}
    # interleave small and block-adjacent sizes so a truncated plan still sees both
    small = sorted(v for v in vals if v <= 31)
    big = sorted(v for v in vals if v > 31)
    out: list[int] = []
    for i in range(max(len(small), len(big))):
        out += small[i : i + 1] + big[i : i + 1]
    return out


def _numel(task: Task, dims: dict[str, int]) -> int:
    try:
        return sum(math.prod(s) for s in task.input_shapes(dims))
    except Exception:
        return 1 << 62


def shrink_to(task: Task, dims: dict[str, int], budget: int) -> dict[str, int]:
    """Halve the largest dim until the case fits ``budget`` input elements."""
    d = dict(dims)
    for _ in range(64):
        if _numel(task, d) <= budget or not d:
            break
        k = max(d, key=lambda n: d[n])
        if d[k] <= task.dims[k].low:
            break
        d[k] = task.dims[k].clamp(max(d[k] // 2, 1))
    return d


def _largest(task: Task, base: dict[str, int], k: str, budget: int) -> int | None:
    dim = task.dims[k]
    lo, hi = base[k], dim.high
    if _numel(task, {**base, k: lo}) > budget:
        return None
    while lo < hi:  # largest legal value of k (others at base) that fits the budget
        mid = (lo + hi + 1) // 2
        if _numel(task, {**base, k: mid}) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return dim.clamp(lo)


def plan_cases(task: Task, device: str, secret: bytes, budget: Budget | None = None,
               extra_random: int = 64, rng_seed: int = 0) -> Plan:
    budget = budget or Budget.for_device(device)
    plan = Plan([])
    n_in = len(task.inputs)
    contig = tuple("contiguous" for _ in range(n_in))
    seen: set[str] = set()

    def add(case: Case) -> None:
        if case.key() in seen:
            return
        seen.add(case.key())
        plan.cases.append(replace(case, seed=derive_seed(secret, case.key())))

    for dtype in task.dtypes:
        for w in task.workloads:
            if _numel(task, w.dims) > budget.max_elems:
                plan.notes.append(f"workload {w.dims} exceeds the {device} case budget; checked at reduced size")
                dims = shrink_to(task, w.dims, budget.max_elems)
                add(Case("workload", dims, dtype, "normal", contig, weight=w.weight, note="(reduced)"))
            else:
                add(Case("workload", dict(w.dims), dtype, "normal", contig, weight=w.weight))
    for c in [c for c in plan.cases if c.kind == "workload"]:
        add(replace(c, kind="repeat", rep=1, note="same shape, fresh values"))
    dtype0 = task.dtypes[0]
    base = shrink_to(task, dict(task.workloads[0].dims), budget.base_elems)
    # boundary dims, one dim at a time, interleaved across dims. On the CPU the other dims are
    # small (at most OTHER_CPU, e.g. 3 rows): a tail or stride bug in the dim under test shows in
    # any row, and the interpreted kernel's cost grows with the program count (the full base
    # shape meets every size in the workload, layout, value, largest and random cases)
    per_dim = {k: [v for v in boundary_values(d.low, d.high, d.multiple_of)] for k, d in task.dims.items()}
    around = base if device != "cpu" else {o: task.dims[o].clamp(min(v, OTHER_CPU)) for o, v in base.items()}
    for i in range(max((len(v) for v in per_dim.values()), default=0)):
        for k, vals in per_dim.items():
            dims = {**around, k: vals[i]} if i < len(vals) else None
            if dims is not None and _numel(task, dims) <= budget.base_elems * 4:
                add(Case("boundary", dims, dtype0, "normal", contig, note=f"{k}={vals[i]}"))
        if i == 2:  # after the first few boundary sizes: layouts and value classes
            _layouts_and_values(task, base, dtype0, add)
    for k in task.dims:
        big = _largest(task, base, k, budget.max_elems)
        if big is not None and big != base[k]:
            add(Case("largest", {**base, k: big}, dtype0, "normal", contig, note=f"largest {k}"))
    for dtype in task.dtypes[1:]:
        for vals in ("uniform", "large"):
            add(Case("values", base, dtype, vals, contig))
    r = random.Random(rng_seed)
    for _ in range(extra_random):
        dims = {k: d.clamp(int(math.exp(r.uniform(math.log(max(d.low, 1)), math.log(max(d.high, 2))))))
                for k, d in task.dims.items()}
        dims = shrink_to(task, dims, budget.base_elems * 4)
        add(Case("random", dims, r.choice(task.dtypes), r.choice(VALUE_CLASSES), contig))
    return plan


def _layouts_and_values(task: Task, base: dict[str, int], dtype: str, add) -> None:  # noqa: ANN001
    n_in = len(task.inputs)
    contig = ["contiguous"] * n_in
    odd = {k: task.dims[k].clamp(v + 1 if v % 2 == 0 else v) for k, v in base.items()}
    for i, inp in enumerate(task.inputs):
        for lay in inp.layouts:
            if lay != "contiguous":
                lays = list(contig)
                lays[i] = lay
                add(Case("layout", odd, dtype, "normal", tuple(lays), note=f"{inp.name} {lay}"))
    mixed = tuple(next((l for l in inp.layouts if l != "contiguous"), "contiguous") for inp in task.inputs)
    if any(l != "contiguous" for l in mixed):
        add(Case("layout", odd, dtype, "normal", mixed, note="all non-contiguous"))
    for vals in VALUE_CLASSES[1:]:
        add(Case("values", odd, dtype, vals, tuple(contig)))
    if any(inp.special for inp in task.inputs):
        add(Case("special", odd, dtype, "special", tuple(contig)))


def iter_shrinks(task: Task, case: Case) -> Iterator[Case]:
    """Smaller variants of a failing case, smallest first, one dim at a time."""
    for k, v in case.dims.items():
        dim = task.dims.get(k)
        if dim is None:
            continue
        near = {b for b in boundary_values(dim.low, max(dim.low, v - 1), dim.multiple_of)}
        for s in sorted({dim.clamp(x) for x in (*SMALL, *near, v // 4, v // 2, v - 1) if x >= 1}):
            if s < v:
                yield replace(case, kind="shrink", dims={**case.dims, k: s})
