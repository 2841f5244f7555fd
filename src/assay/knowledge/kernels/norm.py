"""RMSNorm (with weight) and LayerNorm (with weight and bias) over the last dim.

One program per row. When the row fits one BLOCK_N block (BLOCK_N = min(param, next power of
two of the row)) the row stays in registers (ONE_PASS); otherwise the kernel loops over
BLOCK_N chunks: statistics first, then the normalising pass. LayerNorm shifts by the row's first
element before summing (mean = k + mean(x - k)), so constant rows normalise to exactly 0 and the
variance does not cancel catastrophically. Inputs are read through their strides; the output is
contiguous, in the input's dtype; arithmetic is fp32.
"""

from __future__ import annotations

from typing import Any

from assay.knowledge.base import KernelTemplate, TensorArg, Trace, last_dim

RMSNORM = '''"""RMSNorm over the last dim with a weight: y = x * rsqrt(mean(x^2) + eps) * w."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_rmsnorm(out_ptr, x_ptr, w_ptr, n_cols, s_row, s_col, s_w, o_row, eps,
               BLOCK_N: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * s_row
    o_ptr = out_ptr + row * o_row
    cols0 = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        mask = cols0 < n_cols
        x = tl.load(x_row + cols0 * s_col, mask=mask, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols0 * s_w, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptr + cols0, (x * r * w).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            x = tl.load(x_row + cols * s_col, mask=cols < n_cols, other=0.0).to(tl.float32)
            acc += x * x
        r = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = cols < n_cols
            x = tl.load(x_row + cols * s_col, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols * s_w, mask=mask, other=0.0).to(tl.float32)
            tl.store(o_ptr + cols, (x * r * w).to(out_ptr.dtype.element_ty), mask=mask)


def $ENTRY(x, weight):
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    w = weight.reshape(-1) if weight.dim() != 1 else weight
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_n = min($BLOCK_N, triton.next_power_of_2(n))
    _k_rmsnorm[(m,)](out, x2, w, n, x2.stride(0), x2.stride(1), w.stride(0), out.stride(0), $EPS,
                     BLOCK_N=block_n, ONE_PASS=block_n >= n, num_warps=$num_warps, num_stages=$num_stages)
    return out.reshape(x.shape)
'''

LAYERNORM = '''"""LayerNorm over the last dim with weight and bias (biased variance, eps inside the sqrt)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_layernorm(out_ptr, x_ptr, w_ptr, b_ptr, n_cols, s_row, s_col, s_w, s_b, o_row, eps,
                 BLOCK_N: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * s_row
    o_ptr = out_ptr + row * o_row
    cols0 = tl.arange(0, BLOCK_N)
    pivot = tl.load(x_row).to(tl.float32)  # shift: exact for constant rows, no cancellation
    if ONE_PASS:
        mask = cols0 < n_cols
        x = tl.load(x_row + cols0 * s_col, mask=mask, other=0.0).to(tl.float32)
        mean = pivot + tl.sum(tl.where(mask, x - pivot, 0.0), axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols0 * s_w, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols0 * s_b, mask=mask, other=0.0).to(tl.float32)
        tl.store(o_ptr + cols0, (xc * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = cols < n_cols
            x = tl.load(x_row + cols * s_col, mask=mask, other=0.0).to(tl.float32)
            acc += tl.where(mask, x - pivot, 0.0)
        mean = pivot + tl.sum(acc, axis=0) / n_cols
        acc = tl.zeros([BLOCK_N], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = cols < n_cols
            x = tl.load(x_row + cols * s_col, mask=mask, other=0.0).to(tl.float32)
            xc = tl.where(mask, x - mean, 0.0)
            acc += xc * xc
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = cols < n_cols
            x = tl.load(x_row + cols * s_col, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols * s_w, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols * s_b, mask=mask, other=0.0).to(tl.float32)
            tl.store(o_ptr + cols, ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


def $ENTRY(x, weight, bias):
    if x.numel() == 0:
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, n)
    w = weight.reshape(-1) if weight.dim() != 1 else weight
    b = bias.reshape(-1) if bias.dim() != 1 else bias
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_n = min($BLOCK_N, triton.next_power_of_2(n))
    _k_layernorm[(m,)](out, x2, w, b, n, x2.stride(0), x2.stride(1), w.stride(0), b.stride(0), out.stride(0),
                       $EPS, BLOCK_N=block_n, ONE_PASS=block_n >= n, num_warps=$num_warps,
                       num_stages=$num_stages)
    return out.reshape(x.shape)
'''

PARAMS = {"BLOCK_N": [256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2, 3]}


def _eps_field(info: dict[str, Any]) -> dict[str, str]:
    return {"EPS": repr(float(info.get("eps", 1e-5)))}


def _rmsnorm_accepts(tr: Trace) -> dict[str, Any] | None:
    """x * rsqrt(mean(x^2, -1, keepdim) + eps) * w (or x / sqrt(...)), over the last dim of x."""
    x_shape, w_shape = tr.input_shapes[0], tr.input_shapes[1]
    if len(x_shape) < 1 or w_shape != x_shape[-1:]:
        return None
    mean = tr.one("mean")
    if mean is None or not mean.tensors() or mean.tensors()[0].shape != x_shape:
        return None
    if not last_dim(mean.arg(1, "dim"), len(x_shape)) or not mean.arg(2, "keepdim", False):
        return None
    eps = [a for c in tr.calls("add") for a in c.args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if len(eps) != 1 or not all(0 <= float(e) < 1 for e in eps):
        return None
    # the weight must be one operand of a multiply (not, say, added)
    if not any(t.source == 1 for c in tr.calls("mul") for t in c.tensors()):
        return None
    return {"eps": float(eps[0])}


def _layernorm_accepts(tr: Trace) -> dict[str, Any] | None:
    call = tr.one("native_layer_norm")
    if call is None:
        return None
    x, shape, w, b = call.arg(0), call.arg(1), call.arg(2), call.arg(3)
    if not (isinstance(x, TensorArg) and x.source == 0 and not x.transposed):
        return None
    if list(shape) != [x.shape[-1]]:
        return None
    if not (isinstance(w, TensorArg) and w.source == 1 and isinstance(b, TensorArg) and b.source == 2):
        return None
    return {"eps": float(call.arg(4, "eps", 1e-5))}


rmsnorm = KernelTemplate(
    name="rmsnorm", family="rmsnorm", op_signature=frozenset({"pow", "mean", "add", "rsqrt", "mul"}),
    alt_signatures=(frozenset({"mul", "mean", "add", "rsqrt"}), frozenset({"pow", "mean", "add", "sqrt", "div", "mul"}),
                    frozenset({"mul", "mean", "add", "sqrt", "div"})),
    params=PARAMS, defaults={"BLOCK_N": 4096, "num_warps": 4, "num_stages": 2}, arity=2, source=RMSNORM,
    fields=_eps_field, accepts=_rmsnorm_accepts,
    description="RMSNorm over the last dim, weight (N,), eps from the reference; fp32 statistics")

layernorm = KernelTemplate(
    name="layernorm", family="layernorm", op_signature=frozenset({"native_layer_norm"}),
    params=PARAMS, defaults={"BLOCK_N": 4096, "num_warps": 4, "num_stages": 2}, arity=3, source=LAYERNORM,
    fields=_eps_field, accepts=_layernorm_accepts,
    description="LayerNorm over the last dim, weight and bias (N,), eps from the reference; shifted fp32 statistics")

TEMPLATES = [rmsnorm, layernorm]
