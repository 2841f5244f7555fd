"""Compare a candidate's output with the fp64 reference: tolerances, NaN/inf rules, where it fails.

Tolerance for a floating output of dtype ``d`` (``K = 8``, ``K_NORM = 16``):

- calibrated (the default): ``e_abs``/``e_norm`` are the max-abs and relative-norm errors of
  the reference itself run in ``d`` against fp64 on the same inputs; then
  ``atol = max(ATOL_FLOOR[d], K * e_abs)``, ``rtol = RTOL_FLOOR[d]``,
  ``norm_tol = max(NORM_FLOOR[d], K_NORM * e_norm)``. The norm factor is larger: under
  cancellation (a row sum close to zero) another legitimate summation order can be 8.5x
  further from fp64 than torch's own (seen: a Triton row sum, 1 row of 200 normals, 1.36e-5
  against a bound of 1.3e-5); the cheats the norm check is for are off by orders of magnitude;
- or the task's own ``(atol, rtol)`` with ``norm_tol = max(NORM_FLOOR[d], rtol)``.

An output passes when every finite element has ``|out - ref| <= atol + rtol * |ref|`` AND
``||out - ref|| / ||ref|| <= norm_tol`` (so all-zeros cannot pass a task whose outputs are
tiny), NaN appears exactly where the reference has NaN, and +/-inf exactly where it has the
same inf. Integer and boolean outputs must match exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

K = 8.0
K_NORM = 16.0
ATOL_FLOOR = {torch.float64: 1e-10, torch.float32: 1e-6, torch.float16: 1e-4, torch.bfloat16: 1e-3}
RTOL_FLOOR = {torch.float64: 1e-7, torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1.6e-2}
# fp64's norm floor is its rtol floor, as for fp32 and fp16: torch 2.13's CPU exp was seen to return
# a first call in a fresh process 3.3e-9 off (relative) in fp64, the oracle's own dtype (docs/measurements.md)
NORM_FLOOR = {torch.float64: 1e-7, torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    norm_tol: float
    source: str  # calibrated | task | exact


def calibrate(dtype: torch.dtype, ref64: torch.Tensor, ref_d: torch.Tensor) -> Tolerance:
    if not dtype.is_floating_point:
        return Tolerance(0.0, 0.0, 0.0, "exact")
    a, b = ref_d.double(), ref64.double()
    finite = torch.isfinite(a) & torch.isfinite(b)
    diff = (a - b).abs()[finite]
    e_abs = float(diff.max()) if diff.numel() else 0.0
    nb = float(b[finite].norm()) if diff.numel() else 0.0
    e_norm = float(diff.norm()) / nb if nb > 0 else 0.0
    return Tolerance(
        atol=max(ATOL_FLOOR.get(dtype, 1e-5), K * e_abs),
        rtol=RTOL_FLOOR.get(dtype, 1e-5),
        norm_tol=max(NORM_FLOOR.get(dtype, 1e-5), K_NORM * e_norm),
        source="calibrated",
    )


def fixed(dtype: torch.dtype, atol: float, rtol: float) -> Tolerance:
    if not dtype.is_floating_point:
        return Tolerance(0.0, 0.0, 0.0, "exact")
    return Tolerance(atol, rtol, max(NORM_FLOOR.get(dtype, 1e-5), rtol), "task")


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float = 0.0
    norm_err: float = 0.0
    bad: int = 0
    total: int = 0
    where: str = ""
    message: str = ""


def compare(out: torch.Tensor, ref64: torch.Tensor, tol: Tolerance, norm: bool = True) -> Comparison:
    """``out`` in its own dtype; ``ref64`` the fp64 (or exact-dtype) reference of the same shape."""
    total = ref64.numel()
    if tol.source == "exact":
        bad_mask = out.ne(ref64.to(out.dtype))
        bad = int(bad_mask.sum())
        return Comparison(bad == 0, float(bad > 0), 0.0, bad, total, locate(bad_mask),
                          "" if bad == 0 else f"{bad}/{total} elements differ (exact dtype)")
    o, r = out.double(), ref64.double()
    if out.dtype.is_floating_point and out.dtype != torch.float64:
        # a true value beyond the output dtype's range rounds to inf: that inf is the right answer
        r = torch.where(ref64.to(out.dtype).isinf() & r.isfinite(), ref64.to(out.dtype).double(), r)
    nan_r, nan_o = r.isnan(), o.isnan()
    inf_r = r.isinf()
    special_bad = (nan_r != nan_o) | (inf_r & (o != r)) | (o.isinf() & ~inf_r)
    finite = torch.isfinite(r) & torch.isfinite(o)
    diff = torch.where(finite, (o - r).abs(), torch.zeros((), dtype=torch.float64))
    elem_bad = finite & (diff > tol.atol + tol.rtol * r.abs())
    bad_mask = special_bad | elem_bad
    bad = int(bad_mask.sum())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rn = float(torch.where(finite, r, torch.zeros((), dtype=torch.float64)).norm())
    dn = float(diff.norm())
    norm_err = dn / rn if rn > 0 else (0.0 if dn <= tol.atol else float("inf"))
    norm_bad = norm and norm_err > tol.norm_tol
    ok = bad == 0 and not norm_bad
    if ok:
        return Comparison(True, max_abs, norm_err, 0, total)
    parts = []
    if int(special_bad.sum()):
        parts.append(f"{int(special_bad.sum())} NaN/inf mismatches")
    if int(elem_bad.sum()):
        parts.append(f"{int(elem_bad.sum())}/{total} elements outside atol={tol.atol:.2g} rtol={tol.rtol:.2g}")
    if norm_bad:
        parts.append(f"relative norm error {norm_err:.3g} > {tol.norm_tol:.2g}")
    where = locate(bad_mask if bad else diff > 0)
    return Comparison(False, max_abs, norm_err, bad, total, where, "; ".join(parts))


def locate(mask: torch.Tensor) -> str:
    """Describe where ``mask`` is set: e.g. 'last 24 of 1000 columns, in all 64 rows'."""
    n = int(mask.sum())
    if n == 0:
        return ""
    if mask.dim() == 0:
        return "the scalar output"
    total = mask.numel()
    if n == total:
        return "every element"
    if mask.dim() == 1:
        return "elements " + _span_text(mask, "elements")
    cols = mask.reshape(-1, mask.shape[-1]).any(0)
    rows = mask.reshape(-1, mask.shape[-1]).any(1)
    col_txt = _span_text(cols, "columns")
    row_txt = f"in all {rows.numel()} rows" if bool(rows.all()) else f"in {int(rows.sum())} of {rows.numel()} rows"
    first = tuple(int(i) for i in mask.nonzero()[0])
    return f"{col_txt}, {row_txt} (first at index {list(first)}; {n}/{total} elements)"


def _span_text(mask1d: torch.Tensor, unit: str) -> str:
    idx = mask1d.nonzero().flatten()
    size = mask1d.numel()
    a, b, n = int(idx[0]), int(idx[-1]), idx.numel()
    if n == size:
        return f"all {size} {unit}"
    contiguous = n == b - a + 1
    if contiguous and b == size - 1:
        return f"last {n} of {size} {unit}"
    if contiguous and a == 0:
        return f"first {n} of {size} {unit}"
    if contiguous:
        return f"{unit} {a}..{b} of {size}"
    return f"{n} of {size} {unit} between {a} and {b}"


def as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]
