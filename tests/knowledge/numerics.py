"""Numerical checks of the rendered kernels off their default parameters (looped paths, layouts,
3-D inputs, special values), run in a subprocess under TRITON_INTERPRET=1.

Interpreted Triton must be chosen before ``triton`` is first imported (its standard library is
jit-decorated at import), so these cannot run inside the pytest process. ``python numerics.py
[NAME ...]`` prints one JSON object: case name -> "ok" or the failure.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import tempfile
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

from assay.knowledge import get_template

_TMP = Path(tempfile.mkdtemp(prefix="assay-kb-"))


def _load(template: str, params: dict[str, Any] | None = None, **info: Any) -> Callable[..., Any]:
    path = _TMP / f"k_{uuid.uuid4().hex[:8]}.py"
    path.write_text(get_template(template).render("f", params, **info))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.f


def _layouts(shape: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(sum(shape))
    base = torch.randn(shape, generator=g)
    wide = torch.randn(shape[:-1] + (2 * shape[-1],), generator=g)
    return [base, base.transpose(-1, -2).contiguous().transpose(-1, -2), wide[..., ::2]]


def _ref(fn: Callable[..., torch.Tensor], *xs: torch.Tensor) -> torch.Tensor:
    """The reference in float64 (the evaluator's oracle), rounded to the input dtype."""
    return fn(*(x.double() for x in xs)).to(xs[0].dtype)


def _close(got: torch.Tensor, want: torch.Tensor, tol: float = 2e-5) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    torch.testing.assert_close(got, want, atol=tol, rtol=tol, equal_nan=True)


ROWS: dict[str, tuple[str, dict[str, Any], dict[str, Any], Callable[..., torch.Tensor], int]] = {
    "softmax": ("softmax", {"BLOCK_M": 4}, {}, lambda a: torch.softmax(a, -1), 1),
    "softmax_looped": ("softmax_looped", {"BLOCK_N": 512}, {}, lambda a: torch.softmax(a, -1), 1),
    "log_softmax": ("log_softmax", {"BLOCK_M": 16}, {}, lambda a: torch.log_softmax(a, -1), 1),
    "log_softmax_looped": ("log_softmax_looped", {"BLOCK_N": 512}, {}, lambda a: torch.log_softmax(a, -1), 1),
    "rmsnorm": ("rmsnorm", {"BLOCK_N": 256}, {"eps": 1e-6},
                lambda a, w: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * w, 2),
    "layernorm": ("layernorm", {"BLOCK_N": 256}, {"eps": 1e-5},
                  lambda a, w, b: F.layer_norm(a, a.shape[-1:], w, b, 1e-5), 3),
    "row_sum": ("row_sum", {"BLOCK_N": 128, "BLOCK_M": 2}, {"keepdim": True}, lambda a: a.sum(-1, keepdim=True), 1),
    "row_mean": ("row_mean", {"BLOCK_N": 256}, {}, lambda a: a.mean(-1), 1),
    "row_max": ("row_max", {"BLOCK_N": 128, "BLOCK_M": 8}, {}, lambda a: a.amax(-1), 1),
}


def _rows_case(key: str) -> None:
    """Rows longer than one block (several chunks and a tail), transposed / strided / 3-D inputs."""
    name, params, info, ref, arity = ROWS[key]
    fn = _load(name, params, **info)
    n = 600
    extra = [torch.randn(n), torch.randn(n)][: arity - 1]
    for x in _layouts((5, n)) + [torch.randn(2, 3, n)]:
        _close(fn(x, *extra), _ref(ref, x, *extra))
    if arity == 1 and name != "row_mean":
        x = torch.randn(3, n)
        x[0, 7], x[1, :], x[2, 550] = math.inf, -math.inf, -math.inf
        _close(fn(x), _ref(ref, x))
    if name == "row_max":
        x = torch.randn(3, n)
        x[1, 599] = math.nan
        _close(fn(x), _ref(ref, x))


def _layernorm_constant_rows() -> None:
    fn = _load("layernorm", eps=1e-5)
    x = torch.full((4, 300), 0.1)
    w, b = torch.randn(300), torch.randn(300)
    assert torch.equal(fn(x, w, b), b.expand(4, 300)), "constant rows do not normalise to exactly the bias"


EW: dict[str, tuple[str, dict[str, Any], Callable[..., torch.Tensor], int]] = {
    "gelu_mul": ("gelu_mul", {}, lambda a, b: F.gelu(a) * b, 2),
    "gelu_mul_tanh": ("gelu_mul", {"approximate": "tanh"}, lambda a, b: F.gelu(a, approximate="tanh") * b, 2),
    "silu_mul": ("silu_mul", {}, lambda a, b: F.silu(a) * b, 2),
    "relu": ("relu", {}, torch.relu, 1),
    "swish": ("swish", {}, lambda a: a * torch.sigmoid(a), 1),
}


def _ew_case(key: str) -> None:
    name, info, ref, arity = EW[key]
    fn = _load(name, {"BLOCK": 256}, **info)
    for x in _layouts((7, 45)) + [torch.randn(3, 4, 5).transpose(0, 2), 50 * torch.randn(7, 45)]:
        others = [torch.randn(x.shape).t().contiguous().t() if x.dim() == 2 else torch.randn(x.shape)][: arity - 1]
        _close(fn(x, *others), _ref(ref, x, *others))
    if arity == 2:  # y broadcast along rows (stride 0), and given as a bare row
        x, y = torch.randn(6, 33), torch.randn(33)
        _close(fn(x, y.expand(6, 33)), _ref(ref, x, y))
        _close(fn(x, y), _ref(ref, x, y))
    x = torch.tensor([[math.nan, -math.inf, math.inf, -1.0, 0.0, 2.0]])
    ys = [torch.ones_like(x)][: arity - 1]
    _close(fn(x, *ys), _ref(ref, x, *ys))  # fp64 torch: gelu(inf) = inf (fp32 torch: nan)
    h = torch.randn(5, 40, dtype=torch.float16)
    hs = [torch.randn(5, 40, dtype=torch.float16)][: arity - 1]
    _close(fn(h, *hs), _ref(ref, h, *hs), tol=2e-3)


def _matmul_case(w_kn: bool) -> None:
    params = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4}
    fn = _load("matmul_bias_relu", params, w_kn=w_kn)
    m, k, n = 37, 45, 29
    for x in (torch.randn(m, k), torch.randn(k, m).t(), torch.randn(2, m, k)):
        ws = (torch.randn(k, n), torch.randn(n, k).t()) if w_kn else (torch.randn(n, k), torch.randn(k, n).t())
        for w in ws:
            b = torch.randn(n)
            want = _ref((lambda a, c, d: torch.relu(a @ c + d)) if w_kn else (lambda a, c, d: F.relu(F.linear(a, c, d))),
                        x, w, b)
            _close(fn(x, w, b), want, tol=1e-4)


CASES: dict[str, Callable[[], None]] = {
    **{f"rows-{k}": (lambda k=k: _rows_case(k)) for k in ROWS},
    "layernorm-constant-rows": _layernorm_constant_rows,
    **{f"elementwise-{k}": (lambda k=k: _ew_case(k)) for k in EW},
    "matmul-kn": lambda: _matmul_case(True),
    "matmul-nk": lambda: _matmul_case(False),
}


def main(names: list[str]) -> None:
    results: dict[str, str] = {}
    for name in names or list(CASES):
        try:
            CASES[name]()
            results[name] = "ok"
        except Exception as e:  # report every case, not just the first failure
            results[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
