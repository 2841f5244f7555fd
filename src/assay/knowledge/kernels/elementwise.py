"""Elementwise chains, fused in one pass: gelu(x) * y, silu(x) * y, relu(x), x * sigmoid(x).

A flat 1-D grid of BLOCK elements per program over the (broadcast) output. When every operand
is contiguous the offsets are the flat index; otherwise each operand is viewed as rows x columns
(a 2-D tensor as it is, other ranks through ``reshape``) and addressed through its own strides,
so transposed, strided, offset and expanded (stride 0) inputs need no copy. fp32 arithmetic;
the output is contiguous, in x's dtype.
"""

from __future__ import annotations

from typing import Any

from assay.knowledge.base import KernelTemplate, Trace

UNARY = '''"""Elementwise $TITLE, one pass."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_unary(out_ptr, x_ptr, numel, n_cols, sx_r, sx_c, BLOCK: tl.constexpr, CONTIG: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    if CONTIG:
        xo = offs
    else:
        r = offs // n_cols
        c = offs % n_cols
        xo = r * sx_r + c * sx_c
    x = tl.load(x_ptr + xo, mask=mask, other=0.0).to(tl.float32)
    y = $BODY
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _rows(t):
    if t.dim() == 2:
        return t
    return t.reshape(1, -1) if t.dim() < 2 else t.reshape(-1, t.shape[-1])


def $ENTRY(x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    numel = out.numel()
    if numel == 0:
        return out
    x2 = _rows(x)
    _k_unary[(triton.cdiv(numel, $BLOCK),)](out, x2, numel, x2.shape[1], x2.stride(0), x2.stride(1),
                                            BLOCK=$BLOCK, CONTIG=x.is_contiguous(), num_warps=$num_warps)
    return out
'''

BINARY = '''"""Elementwise $TITLE, fused in one pass."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_binary(out_ptr, x_ptr, y_ptr, numel, n_cols, sx_r, sx_c, sy_r, sy_c,
              BLOCK: tl.constexpr, CONTIG: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    if CONTIG:
        xo = offs
        yo = offs
    else:
        r = offs // n_cols
        c = offs % n_cols
        xo = r * sx_r + c * sx_c
        yo = r * sy_r + c * sy_c
    x = tl.load(x_ptr + xo, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + yo, mask=mask, other=0.0).to(tl.float32)
    out = $BODY
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def _rows(t):
    if t.dim() == 2:
        return t
    return t.reshape(1, -1) if t.dim() < 2 else t.reshape(-1, t.shape[-1])


def $ENTRY(x, y):
    if x.shape != y.shape:
        x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    numel = out.numel()
    if numel == 0:
        return out
    x2, y2 = _rows(x), _rows(y)
    contig = x.is_contiguous() and y.is_contiguous()
    _k_binary[(triton.cdiv(numel, $BLOCK),)](out, x2, y2, numel, x2.shape[1], x2.stride(0), x2.stride(1),
                                             y2.stride(0), y2.stride(1), BLOCK=$BLOCK, CONTIG=contig,
                                             num_warps=$num_warps)
    return out
'''

GELU_ERF = "0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))"
# tanh(u) = 1 - 2 / (exp(2u) + 1): saturates to +-1 without overflow trouble
GELU_TANH = "0.5 * x * (2.0 - 2.0 / (tl.exp(1.5957691216057308 * (x + 0.044715 * x * x * x)) + 1.0))"
SIGMOID = "(1.0 / (1.0 + tl.exp(-x)))"
# relu keeps NaN (torch.relu(nan) is nan): zero only where x < 0
RELU = "tl.where(x < 0.0, 0.0, x)"

PARAMS = {"BLOCK": [256, 512, 1024, 2048, 4096], "num_warps": [1, 2, 4, 8]}
DEFAULTS = {"BLOCK": 1024, "num_warps": 4}


def _gelu_fields(info: dict[str, Any]) -> dict[str, str]:
    gelu = GELU_TANH if info.get("approximate", "none") == "tanh" else GELU_ERF
    return {"BODY": f"({gelu}) * y"}


def _is_input(a: Any, i: int, tr: Trace) -> bool:
    from assay.knowledge.base import TensorArg

    return isinstance(a, TensorArg) and a.source == i and not a.transposed and a.shape == tr.input_shapes[i]


def _same_shape(tr: Trace) -> bool:
    return all(s == tr.output_shape for s in tr.input_shapes)


def _act_times_y(act: str):  # noqa: ANN202
    def accepts(tr: Trace) -> dict[str, Any] | None:
        a, m = tr.one(act), tr.one("mul")
        if a is None or m is None or not _is_input(a.arg(0), 0, tr) or not _same_shape(tr):
            return None
        if not any(_is_input(t, 1, tr) for t in m.tensors()) or len(m.tensors()) != 2:
            return None
        info: dict[str, Any] = {}
        if act == "gelu":
            approx = a.arg(1, "approximate", "none")
            if approx not in ("none", "tanh"):
                return None
            info["approximate"] = approx
        return info
    return accepts


def _relu_accepts(tr: Trace) -> dict[str, Any] | None:
    call = tr.one("relu")
    return {} if call is not None and _is_input(call.arg(0), 0, tr) and _same_shape(tr) else None


def _swish_accepts(tr: Trace) -> dict[str, Any] | None:
    if tr.compute == {"silu"}:
        call = tr.one("silu")
        return {} if call is not None and _is_input(call.arg(0), 0, tr) else None
    s, m = tr.one("sigmoid"), tr.one("mul")
    if s is None or m is None or not _is_input(s.arg(0), 0, tr) or not _same_shape(tr):
        return None
    # x * sigmoid(x): one operand of the multiply is x itself
    return {} if any(_is_input(t, 0, tr) for t in m.tensors()) else None


gelu_mul = KernelTemplate(
    name="gelu_mul", family="elementwise", op_signature=frozenset({"gelu", "mul"}), params=PARAMS,
    defaults=DEFAULTS, arity=2, source=BINARY, constants={"TITLE": "gelu(x) * y"}, fields=_gelu_fields,
    accepts=_act_times_y("gelu"), description="gelu(x) * y (erf or tanh GELU, from the reference), one fused pass")

silu_mul = KernelTemplate(
    name="silu_mul", family="elementwise", op_signature=frozenset({"silu", "mul"}), params=PARAMS,
    defaults=DEFAULTS, arity=2, source=BINARY, constants={"TITLE": "silu(x) * y", "BODY": f"x * {SIGMOID} * y"},
    accepts=_act_times_y("silu"), description="silu(x) * y (SwiGLU gate), one fused pass")

relu = KernelTemplate(
    name="relu", family="elementwise", op_signature=frozenset({"relu"}), params=PARAMS, defaults=DEFAULTS,
    arity=1, source=UNARY, constants={"TITLE": "relu", "BODY": RELU}, accepts=_relu_accepts,
    description="relu(x) (NaN kept, as torch does)")

swish = KernelTemplate(
    name="swish", family="elementwise", op_signature=frozenset({"sigmoid", "mul"}), alt_signatures=(frozenset({"silu"}),),
    params=PARAMS, defaults=DEFAULTS, arity=1, source=UNARY, constants={"TITLE": "x * sigmoid(x)", "BODY": f"x * {SIGMOID}"},
    accepts=_swish_accepts, description="x * sigmoid(x) (= silu(x)), one pass")

TEMPLATES = [gelu_mul, silu_mul, relu, swish]
