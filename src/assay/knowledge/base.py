"""Parametric kernel templates and the matcher that picks them for a task.

A ``KernelTemplate`` is a complete candidate file with ``$PARAM`` placeholders: ``render`` fills
in the entry name, a point of the parameter space (block sizes, ``num_warps``, ``num_stages``)
and what the matcher learnt about the task (``eps``, ``keepdim``, weight orientation, ...), and
returns Python source that ``assay check`` can evaluate as it is.

``match(task)`` runs the task's reference once (trusted code, in this process) on small inputs
under a ``TorchDispatchMode`` and compares the aten compute ops it executed with each template's
signature; each template then inspects the recorded calls (reduction dim, eps, bias operand) and
either binds what it needs or declines.
"""

from __future__ import annotations

import itertools
import keyword
import math
import string
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from assay.task.spec import Task
from assay.verify.integrity import PLUMBING

__all__ = ["KernelTemplate", "OpCall", "TensorArg", "Trace", "trace_task", "match", "templates", "get_template"]


# -- what the reference executed ---------------------------------------------------------------------
@dataclass(frozen=True)
class TensorArg:
    """A tensor seen as an op argument: its shape and dtype, and which task input it is (a view of)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    source: int | None = None  # index of the task input it is, or a view of
    transposed: bool = False  # a transposed view of that input (t / transpose / 2-D permute)

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class OpCall:
    name: str  # overload packet name, trailing "_" stripped (add_ -> add)
    overload: str  # e.g. aten.sum.dim_IntList
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    compute: bool

    def arg(self, i: int, name: str | None = None, default: Any = None) -> Any:
        if name is not None and name in self.kwargs:
            return self.kwargs[name]
        return self.args[i] if i < len(self.args) else default

    def tensors(self) -> list[TensorArg]:
        return [a for a in self.args if isinstance(a, TensorArg)]


@dataclass
class Trace:
    """One run of the reference: its ops, inputs and output."""

    ops: list[OpCall] = field(default_factory=list)
    compute: frozenset[str] = frozenset()
    arity: int = 0
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    input_dtypes: list[torch.dtype | None] = field(default_factory=list)
    output_shape: tuple[int, ...] | None = None  # None: not a single tensor
    output_dtype: torch.dtype | None = None
    row_len: int = 0  # the largest last dim of input 0 over the task's workloads
    row_limit: int = 0  # the largest last dim of input 0 the task admits (its Dim's high)
    problem: str | None = None  # why no template applies (the trace failed, hidden parameters, ...)

    def calls(self, name: str) -> list[OpCall]:
        return [o for o in self.ops if o.compute and o.name == name]

    def one(self, name: str) -> OpCall | None:
        found = self.calls(name)
        return found[0] if len(found) == 1 else None


_FLIP = {"t", "transpose", "permute", "numpy_T", "mT"}
_KEEP = {"alias", "detach", "view", "_unsafe_view", "reshape", "_reshape_alias", "contiguous", "clone", "lift_fresh",
         "expand", "unsqueeze", "squeeze"}


class _Recorder(TorchDispatchMode):
    def __init__(self, inputs: Sequence[Any]) -> None:
        super().__init__()
        self.calls: list[OpCall] = []
        self.source: dict[int, tuple[int, bool]] = {}
        self.keep: list[Any] = []  # keeps recorded tensors alive, so their ids stay unique
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                self.source[id(x)] = (i, False)
                self.keep.append(x)

    def _arg(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            src = self.source.get(id(a))
            return TensorArg(tuple(a.shape), a.dtype, src[0] if src else None, src[1] if src else False)
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(b) for b in a)
        return a

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        raw = str(func.overloadpacket.__name__)
        name = raw.rstrip("_")
        compute = raw not in PLUMBING and name not in PLUMBING
        self.calls.append(OpCall(name, str(func), tuple(self._arg(a) for a in args),
                                 {k: self._arg(v) for k, v in kwargs.items()}, compute))
        out = func(*args, **kwargs)
        src = self.source.get(id(args[0])) if args and isinstance(args[0], torch.Tensor) else None
        if src is not None and isinstance(out, torch.Tensor):
            flip = False
            if raw in _FLIP and out.dim() == 2 and args[0].dim() == 2:
                if raw == "transpose":
                    flip = {args[1] % 2, args[2] % 2} == {0, 1}
                elif raw == "permute":
                    flip = [d % 2 for d in args[1]] == [1, 0]
                else:
                    flip = True
            if flip or raw in _KEEP:
                self.source[id(out)] = (src[0], src[1] ^ flip)
                self.keep.append(out)
        return out


def trace_task(task: Task, max_elems: int = 4096) -> Trace:
    """Run the reference once on small inputs (the first workload, shrunk) and record its ops."""
    from assay.verify.cases import Case, shrink_to
    from assay.verify.inputs import make_inputs
    from assay.verify.reference import init_for

    tr = Trace()
    try:
        dims = shrink_to(task, dict(task.workloads[0].dims), max_elems)
        shapes = task.input_shapes(dims)
        tr.arity = len(shapes)
        rows = [task.input_shapes(dict(w.dims)) for w in task.workloads]
        tr.row_len = max((s[0][-1] for s in rows if s and len(s[0]) >= 1), default=0)
        tr.row_limit = tr.row_len
        if task.inputs and task.inputs[0].shape:
            last = task.inputs[0].shape[-1]
            tr.row_limit = task.dims[last].high if isinstance(last, str) else int(last)
        case = Case("trace", dims, task.dtypes[0], "normal", tuple("contiguous" for _ in shapes), seed=0)
        inputs = make_inputs(task, case)
        tr.input_shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else () for x in inputs]
        tr.input_dtypes = [x.dtype if isinstance(x, torch.Tensor) else None for x in inputs]
        fn: Any = task.reference
        init = init_for(task, case)
        if init is not None:
            torch.manual_seed(init["seed"])
            fn = task.reference(*init["args"])
            if any(True for _ in fn.parameters()) or any(True for _ in fn.buffers()):
                tr.problem = "the reference module holds parameters or buffers (not inputs of the entry)"
        rec = _Recorder(inputs)
        with torch.no_grad(), rec:
            out = fn(*inputs)
    except Exception as e:  # the reference is trusted, but may reject the shrunk shape
        tr.problem = f"tracing the reference failed: {type(e).__name__}: {e}"
        return tr
    tr.ops = rec.calls
    tr.compute = frozenset(o.name for o in rec.calls if o.compute)
    if type(out) is torch.Tensor:
        tr.output_shape, tr.output_dtype = tuple(out.shape), out.dtype
    if tr.problem is None:
        if not all(isinstance(d, torch.dtype) and d.is_floating_point for d in tr.input_dtypes):
            tr.problem = "the inputs are not all floating-point tensors"
        elif tr.output_shape is None:
            tr.problem = "the reference does not return a single tensor"
        elif tr.output_dtype != tr.input_dtypes[0]:
            tr.problem = f"the output dtype {tr.output_dtype} differs from the input's {tr.input_dtypes[0]}"
    return tr


def last_dim(dim: Any, ndim: int) -> bool:
    """``dim`` (an int or a one-element list) names the last dim of an ``ndim``-d tensor."""
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and ndim >= 1 and dim in (-1, ndim - 1)


# -- the template ------------------------------------------------------------------------------------
@dataclass
class KernelTemplate:
    """A complete candidate-file template for one op family.

    ``source`` is a ``string.Template``: ``$ENTRY`` (the function the evaluator calls), one
    ``$NAME`` per parameter, one per entry of ``constants`` and of what ``fields(info)`` returns.
    """

    name: str
    family: str
    op_signature: frozenset[str]  # the reference's aten compute ops (exact set) that identify the family
    params: dict[str, list[Any]]  # the search space: name -> choices (the default first)
    arity: int  # number of entry inputs
    source: str
    defaults: dict[str, Any] = field(default_factory=dict)  # moved to the front of their choices
    alt_signatures: tuple[frozenset[str], ...] = ()  # other spellings of the same computation
    constants: dict[str, str] = field(default_factory=dict)  # fixed substitutions of this template
    fields: Callable[[dict[str, Any]], dict[str, str]] | None = None  # task info -> substitutions
    accepts: Callable[[Trace], dict[str, Any] | None] | None = None  # structural check -> task info
    prefer: Callable[[dict[str, Any]], float] | None = None  # ranking among matches (higher first)
    info: dict[str, Any] = field(default_factory=dict)  # task info bound by ``match``
    description: str = ""

    def __post_init__(self) -> None:
        self.op_signature = frozenset(self.op_signature)
        self.alt_signatures = tuple(frozenset(s) for s in self.alt_signatures)
        unknown = set(self.defaults) - set(self.params)
        if unknown:
            raise ValueError(f"template {self.name}: defaults for unknown params {sorted(unknown)}")
        # each choice list starts with its default, so ``params[k][0]`` is the default too
        space: dict[str, list[Any]] = {}
        for k, choices in self.params.items():
            d = self.defaults.get(k, choices[0])
            if d not in choices:
                raise ValueError(f"template {self.name}: default {k}={d!r} is not one of its choices")
            space[k] = [d, *(c for c in choices if c != d)]
        self.params = space

    @property
    def signatures(self) -> tuple[frozenset[str], ...]:
        return (self.op_signature, *self.alt_signatures)

    def default_params(self) -> dict[str, Any]:
        return {k: self.defaults.get(k, v[0]) for k, v in self.params.items()}

    def configs(self) -> Iterator[dict[str, Any]]:
        """Every point of the parameter space (the defaults first)."""
        first = self.default_params()
        yield first
        keys = list(self.params)
        for combo in itertools.product(*(self.params[k] for k in keys)):
            point = dict(zip(keys, combo))
            if point != first:
                yield point

    def space_size(self) -> int:
        return math.prod(len(v) for v in self.params.values())

    def bind(self, **info: Any) -> "KernelTemplate":
        """A copy carrying task info, used by ``render`` when not given again."""
        return replace(self, info={**self.info, **info})

    def render(self, entry_name: str, params: dict[str, Any] | None = None, **task_info: Any) -> str:
        """A full candidate source defining ``entry_name`` (a function, or ``ModelNew``)."""
        if not (entry_name.isidentifier() and not keyword.iskeyword(entry_name)):
            raise ValueError(f"entry name {entry_name!r} is not a Python identifier")
        p = self.default_params()
        unknown = set(params or {}) - set(p)
        if unknown:
            raise ValueError(f"template {self.name}: unknown params {sorted(unknown)} (known: {sorted(p)})")
        p.update(params or {})
        info = {**self.info, **task_info}
        module = entry_name == "ModelNew"
        subs: dict[str, str] = {"ENTRY": "_assay_entry" if module else entry_name, "NAME": self.name}
        subs.update({k: repr(v) for k, v in p.items()})
        subs.update(self.constants)
        if self.fields is not None:
            subs.update(self.fields(info))
        try:
            text = string.Template(self.source).substitute(subs)
        except KeyError as e:
            raise ValueError(f"template {self.name}: no value for placeholder {e}") from None
        shown = ", ".join(f"{k}={v!r}" for k, v in p.items())
        text = f"# generated by assay.knowledge: template {self.name} ({shown})\n" + text
        if module:
            text += _MODULE_WRAPPER
        return text


_MODULE_WRAPPER = '''

class ModelNew(torch.nn.Module):
    """The reference module holds no parameters: the forward is the kernel entry."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *inputs):
        return _assay_entry(*inputs)
'''


# -- matching ----------------------------------------------------------------------------------------
def templates() -> list[KernelTemplate]:
    from assay.knowledge.kernels import TEMPLATES

    return list(TEMPLATES)


def get_template(name: str) -> KernelTemplate:
    for t in templates():
        if t.name == name:
            return t
    raise KeyError(f"no kernel template named {name!r}")


def match(task: Task, candidates: Sequence[KernelTemplate] | None = None,
          trace: Trace | None = None) -> list[KernelTemplate]:
    """The templates that compute ``task``'s reference, bound to its info, best first."""
    tr = trace or trace_task(task)
    if tr.problem is not None:
        return []
    found: list[KernelTemplate] = []
    for t in candidates if candidates is not None else templates():
        if t.arity != tr.arity or tr.compute not in t.signatures:
            continue
        info = t.accepts(tr) if t.accepts is not None else {}
        if info is None:
            continue
        found.append(t.bind(row_len=tr.row_len, **info))
    found.sort(key=lambda t: -(t.prefer(t.info) if t.prefer else 0.0))
    return found
