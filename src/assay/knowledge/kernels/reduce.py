"""Row reductions over the last dim: sum, mean, max (``keepdim`` either way).

BLOCK_M rows per program; each program walks its rows' columns in BLOCK_N chunks, accumulating
per lane in fp32, and reduces the lanes once at the end. Max propagates NaN like torch (per-lane
``propagate_nan=ALL``, then an explicit NaN check after the lane reduction). Inputs are read
through their strides; the output is contiguous, in the input's dtype.
"""

from __future__ import annotations

from typing import Any

from assay.knowledge.base import KernelTemplate, Trace, last_dim

SOURCE = '''"""Row $TITLE over the last dim: BLOCK_M rows per program, BLOCK_N columns per step."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_row_reduce(out_ptr, x_ptr, n_rows, n_cols, s_row, s_col,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, OP: tl.constexpr):
    # OP: 0 sum, 1 mean, 2 max
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < n_rows
    r64 = rows.to(tl.int64)[:, None]
    cols0 = tl.arange(0, BLOCK_N)
    if OP == 2:
        acc = tl.full([BLOCK_M, BLOCK_N], -float("inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + cols0
        mask = rmask[:, None] & (cols < n_cols)[None, :]
        ptrs = x_ptr + r64 * s_row + cols[None, :] * s_col
        if OP == 2:
            x = tl.load(ptrs, mask=mask, other=-float("inf")).to(tl.float32)
            acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
        else:
            x = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
            acc += x
    if OP == 2:
        r = tl.max(acc, axis=1)
        has_nan = tl.sum((acc != acc).to(tl.int32), axis=1) > 0
        r = tl.where(has_nan, float("nan"), r)
    else:
        r = tl.sum(acc, axis=1)
        if OP == 1:
            r = r / n_cols
    tl.store(out_ptr + rows, r.to(out_ptr.dtype.element_ty), mask=rmask)


def $ENTRY(x):
    n = x.shape[-1]
    lead = tuple(x.shape[:-1])
    shape = lead + (1,) if $KEEPDIM else lead
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    m = x2.shape[0]
    out = torch.empty((m,), dtype=x.dtype, device=x.device)
    if m > 0:
        block_n = min($BLOCK_N, triton.next_power_of_2(max(n, 1)))
        block_m = max(1, min($BLOCK_M, $MAX_TILE // block_n))
        _k_row_reduce[(triton.cdiv(m, block_m),)](out, x2, m, n, x2.stride(0), x2.stride(1),
                                                  BLOCK_M=block_m, BLOCK_N=block_n, OP=$OP,
                                                  num_warps=$num_warps, num_stages=$num_stages)
    return out.reshape(shape)
'''

PARAMS = {"BLOCK_M": [1, 2, 4, 8, 16], "BLOCK_N": [128, 256, 512, 1024, 2048, 4096],
          "num_warps": [1, 2, 4, 8], "num_stages": [1, 2, 3]}
DEFAULTS = {"BLOCK_M": 4, "BLOCK_N": 1024, "num_warps": 4, "num_stages": 2}


def _accepts(op: str, keep_pos: int):  # noqa: ANN202
    def accepts(tr: Trace) -> dict[str, Any] | None:
        call = tr.one(op)
        if call is None or len(call.tensors()) != 1:
            return None
        x = call.tensors()[0]
        if x.source != 0 or x.transposed or x.shape != tr.input_shapes[0] or x.ndim < 1:
            return None
        if not last_dim(call.arg(1, "dim"), x.ndim):
            return None
        if call.kwargs.get("dtype") is not None or (len(call.args) > keep_pos + 1 and call.args[keep_pos + 1] is not None):
            return None  # an accumulation / output dtype the template does not model
        keepdim = bool(call.arg(keep_pos, "keepdim", False))
        want = x.shape[:-1] + ((1,) if keepdim else ())
        if tr.output_shape != want:
            return None
        return {"keepdim": keepdim}
    return accepts


def _fields(info: dict[str, Any]) -> dict[str, str]:
    return {"KEEPDIM": repr(bool(info.get("keepdim", False)))}


def _max_accepts(tr: Trace) -> dict[str, Any] | None:
    if "amax" in tr.compute:
        return _accepts("amax", 2)(tr)
    call = tr.one("max")  # max.dim: (values, indices); the reference returns .values only
    if call is None or call.overload != "aten.max.dim":
        return None
    return _accepts("max", 2)(tr)


def _template(name: str, op: int, sig: set[str], accepts, alt=()) -> KernelTemplate:  # noqa: ANN001
    return KernelTemplate(
        name=name, family="row_reduce", op_signature=frozenset(sig), alt_signatures=alt, params=PARAMS,
        defaults=DEFAULTS, arity=1, source=SOURCE, fields=_fields, accepts=accepts,
        constants={"OP": str(op), "TITLE": name.removeprefix("row_"), "MAX_TILE": "16384"},
        description=f"{name.removeprefix('row_')} over the last dim (keepdim from the reference), fp32 accumulation")


row_sum = _template("row_sum", 0, {"sum"}, _accepts("sum", 2))
row_mean = _template("row_mean", 1, {"mean"}, _accepts("mean", 2))
row_max = _template("row_max", 2, {"amax"}, _max_accepts, alt=(frozenset({"max"}),))

TEMPLATES = [row_sum, row_mean, row_max]
