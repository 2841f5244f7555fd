"""Dispatch modes of assay's own that need not import ``torch._dynamo`` (~2.5 s of CPU).

torch wraps the ``__torch_dispatch__`` of every ``TorchDispatchMode`` subclass in
``torch._dynamo.disable``, and that wrapper imports ``torch._dynamo`` on the mode's first
recorded op. Three modes run on every check: the worker's op recorder (``trace``), the
evaluator's recorder of the reference (``verify/integrity.py``, which opts out itself) and the
FLOP counter of the roofline (``torch.utils.flop_counter``). The wrapper only matters for a
frame that dynamo compiles while the mode is active, and dynamo runs such frames eagerly (a
compiled candidate records the same aten ops with or without it: checked with the eager and
inductor backends), so for the modes defined in the modules below it is left off. Modes defined
anywhere else (a candidate's included) keep torch's default.

Importing this module installs the policy; it must happen before those modules define their
classes: the worker imports it before the candidate (``ASSAY_PREIMPORT``), the evaluator before
it imports the timing stage. Where a class was defined earlier, it keeps the wrapper (slower,
same result).
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

MODULES = frozenset({"assay.sandbox.worker", "torch.utils.flop_counter"})

# torch versions without the hook (it is not in every release we support) keep their behaviour
_hook = TorchDispatchMode.__dict__.get("_should_skip_dynamo")
_default = getattr(_hook, "__func__", None)


def _should_skip_dynamo(cls: type) -> bool:
    if cls.__module__ in MODULES:
        return False
    return _default(cls) if _default is not None else True


if _default is not None and getattr(TorchDispatchMode._should_skip_dynamo, "__func__", None) is not _should_skip_dynamo:
    TorchDispatchMode._should_skip_dynamo = classmethod(_should_skip_dynamo)  # type: ignore[method-assign,assignment]
