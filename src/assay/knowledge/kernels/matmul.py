"""GEMM with a fused epilogue: relu(x @ W + b), fp32 accumulation with ``tl.dot``.

Tiles of BLOCK_M x BLOCK_N outputs, BLOCK_K steps along K (masked tails on every edge, zeros in
the padding so partial K blocks add nothing), grouped program order (GROUP_M) for L2 reuse. The
weight is read through its strides in the orientation the reference uses it: ``x @ w`` with w
(K, N), or ``F.linear(x, w, b)`` with w (N, K); the matcher finds out which. ``tl.dot`` runs with
``input_precision="ieee"`` (no TF32 rounding of fp32 inputs). Leading dims of x are flattened;
the output is contiguous, in x's dtype.
"""

from __future__ import annotations

from typing import Any

from assay.knowledge.base import KernelTemplate, TensorArg, Trace

SOURCE = '''"""relu(x @ W + b): a tiled Triton GEMM, fp32 accumulation, bias and relu fused in the epilogue."""

import torch
import triton
import triton.language as tl


@triton.jit
def _k_gemm_bias_relu(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                      s_xm, s_xk, s_wk, s_wn, s_b, s_om, s_on,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    group = pid // per_group
    first_m = group * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_ok = kk < K
        a = tl.load(x_ptr + rm[:, None] * s_xm + kk[None, :] * s_xk, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptr + kk[:, None] * s_wk + rn[None, :] * s_wn, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    bias = tl.load(b_ptr + rn * s_b, mask=n_ok, other=0.0).to(tl.float32)
    acc = acc + bias[None, :]
    acc = tl.where(acc < 0.0, 0.0, acc)  # relu, NaN kept
    tl.store(out_ptr + rm[:, None] * s_om + rn[None, :] * s_on, acc.to(out_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


def $ENTRY(x, weight, bias):
    k = x.shape[-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, k)
    m = x2.shape[0]
    if $W_KN:  # x @ weight, weight (K, N)
        n = weight.shape[1]
        s_wk, s_wn = weight.stride(0), weight.stride(1)
    else:  # F.linear(x, weight, bias), weight (N, K)
        n = weight.shape[0]
        s_wk, s_wn = weight.stride(1), weight.stride(0)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m > 0 and n > 0:
        grid = (triton.cdiv(m, $BLOCK_M) * triton.cdiv(n, $BLOCK_N),)
        _k_gemm_bias_relu[grid](x2, weight, bias, out, m, n, k,
                                x2.stride(0), x2.stride(1), s_wk, s_wn, bias.stride(0), out.stride(0), out.stride(1),
                                BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K, GROUP_M=$GROUP_M,
                                num_warps=$num_warps, num_stages=$num_stages)
    return out.reshape(tuple(x.shape[:-1]) + (n,))
'''

PARAMS = {"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [16, 32, 64, 128, 256], "BLOCK_K": [16, 32, 64],
          "GROUP_M": [1, 4, 8], "num_warps": [2, 4, 8], "num_stages": [2, 3, 4, 5]}
DEFAULTS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}


def _accepts(tr: Trace) -> dict[str, Any] | None:
    """relu(x @ w + b), relu(addmm(b, x, w)) or relu(F.linear(x, w, b)); x is input 0, w 1, b 2."""
    if tr.one("relu") is None or tr.ops and [o.name for o in tr.ops if o.compute][-1] != "relu":
        return None
    b_shape = tr.input_shapes[2]
    if len(b_shape) != 1:
        return None
    if "addmm" in tr.compute:
        mm = tr.one("addmm")
        if mm is None or mm.kwargs.get("beta", 1) != 1 or mm.kwargs.get("alpha", 1) != 1:
            return None
        bias_ok = _is(mm.arg(0), 2)
        mat1, mat2 = mm.arg(1), mm.arg(2)
    else:
        mm, add = tr.one("mm"), tr.one("add")
        if mm is None or add is None or add.kwargs.get("alpha", 1) != 1:
            return None
        bias_ok = any(_is(t, 2) for t in add.tensors()) and len(add.tensors()) == 2
        mat1, mat2 = mm.arg(0), mm.arg(1)
    if not bias_ok or not _is(mat1, 0) or mat1.transposed or not _is(mat2, 1):
        return None
    w_kn = not mat2.transposed
    n = mat2.shape[1]
    if b_shape != (n,):
        return None
    return {"w_kn": w_kn}


def _is(a: Any, i: int) -> bool:
    return isinstance(a, TensorArg) and a.source == i


def _fields(info: dict[str, Any]) -> dict[str, str]:
    return {"W_KN": repr(bool(info.get("w_kn", True)))}


matmul_bias_relu = KernelTemplate(
    name="matmul_bias_relu", family="matmul_epilogue",
    op_signature=frozenset({"mm", "add", "relu"}), alt_signatures=(frozenset({"addmm", "relu"}),),
    params=PARAMS, defaults=DEFAULTS, arity=3, source=SOURCE, fields=_fields, accepts=_accepts,
    description="relu(x @ W + b) / relu(F.linear(x, W, b)): tl.dot tiles, fp32 accumulate, fused bias + relu")

TEMPLATES = [matmul_bias_relu]
