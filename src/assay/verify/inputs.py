"""Make a case's inputs in the trusted process: values over each input's domain, then layout.

Value classes (over the input's legal domain ``[lo, hi]``):
normal (N(0,1), folded into the domain), uniform (U[-9, 9] clipped to the domain, so
negatives appear where legal), large (N(0, 1e3) where the domain is unbounded, else the
domain's end points), repeated (4 distinct values), constant_rows (each row one value),
zeros (0, or ``lo`` where 0 is illegal), special (normal plus NaN/+inf/-inf where the
contract defines them). Non-contiguous layouts keep the values and change only the memory:
transposed (strides swapped), strided (every other element; the gaps hold NaN so a kernel
that reads them is caught), offset (storage offset 1: a misaligned start), expanded
(a stride-0 leading dim).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from assay.task.spec import Domain, Task, parse_dtype
from assay.verify.cases import Case


def make_values(shape: tuple[int, ...], dtype: torch.dtype, domain: Domain, cls: str,
                special: tuple[str, ...], gen: torch.Generator) -> torch.Tensor:
    lo, hi = domain.low, domain.high
    if not dtype.is_floating_point:
        a = int(max(lo, -100 if dtype != torch.uint8 else 0)) if math.isfinite(lo) else (-100 if dtype.is_signed else 0)
        b = int(min(hi, 100)) if math.isfinite(hi) else 100
        if dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=gen).bool()
        return torch.randint(a, b + 1, shape, generator=gen, dtype=torch.int64).to(dtype)
    x = _floats(shape, lo, hi, cls, gen)
    if cls == "special" and special and x.numel():
        flat = x.view(-1)
        n = max(1, flat.numel() // 20)
        idx = torch.randperm(flat.numel(), generator=gen)[: 3 * n]
        if "nan" in special:
            flat[idx[:n]] = math.nan
        if "inf" in special:
            flat[idx[n : 2 * n]] = math.inf
            flat[idx[2 * n :]] = -math.inf
    if domain.integer:
        x = x.round()
    return x.to(dtype)


def _floats(shape: tuple[int, ...], lo: float, hi: float, cls: str, gen: torch.Generator) -> torch.Tensor:
    f64 = torch.float64
    bounded = math.isfinite(lo) and math.isfinite(hi)

    def into(x: torch.Tensor) -> torch.Tensor:  # fold a real sample into [lo, hi]
        if bounded:
            return lo + (hi - lo) * torch.sigmoid(x)
        if math.isfinite(lo):
            return lo + x.abs()
        if math.isfinite(hi):
            return hi - x.abs()
        return x

    if cls in ("normal", "special"):
        return into(torch.randn(shape, generator=gen, dtype=f64))
    if cls == "uniform":
        a, b = max(lo, -9.0), min(hi, 9.0)
        if a >= b:
            a, b = lo, hi
        return a + (b - a) * torch.rand(shape, generator=gen, dtype=f64)
    if cls == "large":
        if bounded:
            ends = torch.tensor([lo, hi], dtype=f64)
            return ends[torch.randint(0, 2, shape, generator=gen)]
        return into(1e3 * torch.randn(shape, generator=gen, dtype=f64))
    if cls == "repeated":
        pool = into(torch.randn(4, generator=gen, dtype=f64))
        return pool[torch.randint(0, 4, shape, generator=gen)]
    if cls == "constant_rows":
        if not shape:
            return into(torch.randn((), generator=gen, dtype=f64))
        rows = into(torch.randn(shape[:-1] + (1,), generator=gen, dtype=f64))
        return rows.expand(shape).contiguous()
    if cls == "zeros":
        z = 0.0 if lo <= 0.0 <= hi else lo
        return torch.full(shape, z, dtype=f64)
    raise ValueError(f"unknown value class {cls!r}")


def apply_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Same values, different memory. Layouts that do not apply to ``x`` leave it contiguous."""
    if layout == "contiguous" or x.numel() == 0:
        return x
    if layout == "transposed" and x.dim() >= 2:
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "strided" and x.dim() >= 1:
        base = torch.full(x.shape[:-1] + (2 * x.shape[-1],), _poison(x.dtype), dtype=x.dtype)
        base[..., ::2] = x
        return base[..., ::2]
    if layout == "offset":
        base = torch.full((x.numel() + 1,), _poison(x.dtype), dtype=x.dtype)
        base[1:] = x.reshape(-1)
        return base[1:].view(x.shape)
    if layout == "expanded" and x.dim() >= 1 and x.shape[0] > 1:
        return x[:1].expand(x.shape)
    return x


def _poison(dtype: torch.dtype) -> Any:
    return math.nan if dtype.is_floating_point else 0


def make_inputs(task: Task, case: Case, device: str = "cpu") -> list[torch.Tensor]:
    """The inputs of ``case``, on the CPU (the worker moves them, keeping their layout)."""
    test_dtype = parse_dtype(case.dtype)
    shapes = task.input_shapes(case.dims)
    fixed = task.fixed_inputs_fn(case.dims, case.seed % (1 << 31)) if task.fixed_inputs_fn else {}
    gen = torch.Generator().manual_seed(case.seed)
    if task.input_factory is not None:
        xs = list(task.input_factory(dict(case.dims), test_dtype, gen, case.values))
    else:
        xs = []
        for i, (inp, shape) in enumerate(zip(task.inputs, shapes)):
            if i in fixed:
                xs.append(fixed[i])
                continue
            dt = task.input_dtype(i, test_dtype)
            xs.append(make_values(tuple(shape), dt, inp.domain, case.values, inp.special, gen))
    return [apply_layout(x, lay) if isinstance(x, torch.Tensor) else x for x, lay in zip(xs, case.layouts)]
