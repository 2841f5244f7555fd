"""Row-wise softmax and log_softmax over the last dim.

- ``softmax`` / ``log_softmax``: BLOCK_M rows per program, each row in one register block
  (BLOCK_N = next power of two of the row length; best for rows up to a few thousand).
- ``softmax_looped`` / ``log_softmax_looped``: one program per row, an online (running max and
  rescaled sum) pass over BLOCK_N chunks, then a writing pass: any row length.

Both read the input through its strides (transposed / strided / offset inputs need no copy) and
mask every tail; the output is contiguous, in the input's dtype, with fp32 arithmetic inside.
Inputs of rank other than 2 are flattened to rows with ``reshape`` (a copy only when needed).
"""

from __future__ import annotations

from typing import Any

from assay.knowledge.base import KernelTemplate, Trace, last_dim

SINGLE = '''"""Row-wise $TITLE over the last dim: BLOCK_M rows per program, one block per row."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_rows_softmax(out_ptr, in_ptr, n_rows, n_cols, s_row, s_col, o_row,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    r64 = rows.to(tl.int64)[:, None]
    x = tl.load(in_ptr + r64 * s_row + cols[None, :] * s_col, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(z)
    s = tl.sum(e, axis=1)[:, None]
    if LOG:
        y = z - tl.log(s)
    else:
        y = e / s
    tl.store(out_ptr + r64 * o_row + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def $ENTRY(x):
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[-1] if x.dim() > 0 else 1
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_n = triton.next_power_of_2(n)
    block_m = max(1, min($BLOCK_M, $MAX_TILE // block_n))
    _k_rows_softmax[(triton.cdiv(m, block_m),)](
        out, x2, m, n, x2.stride(0), x2.stride(1), out.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, LOG=$LOG, num_warps=$num_warps)
    return out.reshape(x.shape)
'''

LOOPED = '''"""Row-wise $TITLE over the last dim, any row length: an online pass over BLOCK_N chunks
(per-lane running max and rescaled sum), then a writing pass."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_looped_softmax(out_ptr, in_ptr, n_cols, s_row, s_col, o_row,
                      BLOCK_N: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = in_ptr + row * s_row
    o_ptr = out_ptr + row * o_row
    cols0 = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + cols0
        x = tl.load(x_row + cols * s_col, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a lane that has seen only -inf keeps s = 0 (and never computes -inf - -inf)
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    shift = tl.where(row_max == -float("inf"), 0.0, row_max)
    total = tl.sum(s * tl.exp(m - shift), axis=0)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + cols0
        mask = cols < n_cols
        x = tl.load(x_row + cols * s_col, mask=mask, other=-float("inf")).to(tl.float32)
        if LOG:
            y = (x - row_max) - tl.log(total)
        else:
            y = tl.exp(x - row_max) / total
        tl.store(o_ptr + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def $ENTRY(x):
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[-1] if x.dim() > 0 else 1
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_n = min($BLOCK_N, triton.next_power_of_2(n))
    _k_looped_softmax[(m,)](out, x2, n, x2.stride(0), x2.stride(1), out.stride(0),
                            BLOCK_N=block_n, LOG=$LOG, num_warps=$num_warps, num_stages=$num_stages)
    return out.reshape(x.shape)
'''


def _accepts(op: str, max_row: int | None = None):  # noqa: ANN202
    def accepts(tr: Trace) -> dict[str, Any] | None:
        if max_row is not None and tr.row_limit > max_row:
            return None  # a row must fit one block: Triton caps a block at 2**20 elements
        call = tr.one(op)
        if call is None or len(call.tensors()) != 1:
            return None
        x = call.tensors()[0]
        if x.source != 0 or x.transposed or x.shape != tr.input_shapes[0]:
            return None
        if not last_dim(call.arg(1, "dim"), x.ndim) or call.arg(2, "half_to_float", False):
            return None
        return {}
    return accepts


def _single_first(info: dict[str, Any]) -> float:
    return 1.0 if info.get("row_len", 0) <= 8192 else -1.0


def _looped_first(info: dict[str, Any]) -> float:
    return -_single_first(info)


SINGLE_PARAMS = {"BLOCK_M": [1, 2, 4, 8, 16], "num_warps": [1, 2, 4, 8, 16]}
LOOPED_PARAMS = {"BLOCK_N": [512, 1024, 2048, 4096, 8192], "num_warps": [2, 4, 8, 16], "num_stages": [1, 2, 3, 4]}
MAX_TILE = "8192"  # elements per program in the single-block kernel (BLOCK_M is clamped to it)
SINGLE_MAX_ROW = 1 << 20  # Triton's largest block: longer rows only through the looped templates

softmax = KernelTemplate(
    name="softmax", family="softmax", op_signature=frozenset({"_softmax"}),
    params=SINGLE_PARAMS, defaults={"BLOCK_M": 1, "num_warps": 4}, arity=1, source=SINGLE,
    constants={"LOG": "False", "TITLE": "softmax", "MAX_TILE": MAX_TILE},
    accepts=_accepts("_softmax", SINGLE_MAX_ROW), prefer=_single_first,
    description="softmax over the last dim, BLOCK_M rows per program, each row in one block")

softmax_looped = KernelTemplate(
    name="softmax_looped", family="softmax", op_signature=frozenset({"_softmax"}),
    params=LOOPED_PARAMS, defaults={"BLOCK_N": 1024, "num_warps": 4, "num_stages": 2}, arity=1, source=LOOPED,
    constants={"LOG": "False", "TITLE": "softmax"},
    accepts=_accepts("_softmax"), prefer=_looped_first,
    description="softmax over the last dim for long rows: online max/sum over BLOCK_N chunks, then a write pass")

log_softmax = KernelTemplate(
    name="log_softmax", family="log_softmax", op_signature=frozenset({"_log_softmax"}),
    params=SINGLE_PARAMS, defaults={"BLOCK_M": 1, "num_warps": 4}, arity=1, source=SINGLE,
    constants={"LOG": "True", "TITLE": "log_softmax", "MAX_TILE": MAX_TILE},
    accepts=_accepts("_log_softmax", SINGLE_MAX_ROW), prefer=_single_first,
    description="log_softmax over the last dim, BLOCK_M rows per program, each row in one block")

log_softmax_looped = KernelTemplate(
    name="log_softmax_looped", family="log_softmax", op_signature=frozenset({"_log_softmax"}),
    params=LOOPED_PARAMS, defaults={"BLOCK_N": 1024, "num_warps": 4, "num_stages": 2}, arity=1, source=LOOPED,
    constants={"LOG": "True", "TITLE": "log_softmax"},
    accepts=_accepts("_log_softmax"), prefer=_looped_first,
    description="log_softmax over the last dim for long rows: online max/sum over BLOCK_N chunks, then a write pass")

TEMPLATES = [softmax, softmax_looped, log_softmax, log_softmax_looped]
