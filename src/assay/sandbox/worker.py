"""The worker: runs in the untrusted process, imports ONE candidate and calls it on request.

It never sees the reference, expected outputs, seeds or secrets: only the inputs it is
sent. Everything it reports is evidence from an untrusted process; the evaluator decides.
Requests: ``load`` (import = build), ``run`` (call on inputs), ``exit``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import traceback
from typing import Any

# Captured before the candidate is imported (its identity is re-checked later).
_perf_counter = time.perf_counter
REQ_FD, RESP_FD = 3, 4


def _guard_network() -> None:
    """Weaker fallback when no network namespace could be made: refuse sockets in Python."""
    import socket

    class _Blocked(socket.socket):
        def connect(self, *a: Any, **k: Any) -> None:
            raise OSError(101, "network is blocked in the assay sandbox")

        connect_ex = connect  # type: ignore[assignment]

    socket.socket = _Blocked  # type: ignore[misc]
    socket.create_connection = lambda *a, **k: (_ for _ in ()).throw(OSError(101, "network is blocked"))  # type: ignore


class _State:
    def __init__(self) -> None:
        self.module: Any = None
        self.entry: Any = None
        self.is_class = False
        self.instance: Any = None
        self.init_key: str | None = None
        self.device = "cpu"


def _load(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    import torch  # noqa: F401  (imported before the candidate so its cost is not "build")

    st.device = req["device"]
    path = req["path"]
    t0 = _perf_counter()
    spec = importlib.util.spec_from_file_location("candidate", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - anything the candidate raises is evidence
        msg = f"{type(e).__name__}: {e}"
        phase = "build" if _is_build_error(e) else "import"
        return {"ok": False, "phase": phase, "error": msg, "traceback": _tb(e)}
    entry = getattr(module, req["entry"], None)
    if entry is None and req.get("fallback_entry"):
        entry = getattr(module, req["fallback_entry"], None)
    if entry is None:
        return {"ok": False, "phase": "entry", "error": f"candidate defines no {req['entry']!r}"}
    st.module, st.entry = module, entry
    st.is_class = isinstance(entry, type)
    return {"ok": True, "import_s": _perf_counter() - t0, "is_class": st.is_class}


def _is_build_error(e: BaseException) -> bool:
    text = f"{type(e).__name__} {e}"
    return any(k in text for k in ("Error building extension", "CompilationError", "error: ", "ninja"))


def _to_device(t: Any, device: str) -> Any:
    import torch

    if not isinstance(t, torch.Tensor) or device == "cpu":
        return t
    # keep the exact strides and offset: move the underlying span, then re-view it
    span = t.storage_offset() + (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0)
    base = torch.as_strided(t, (span,), (1,), 0).to(device)
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def _run(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    import torch

    dev = st.device
    if st.is_class:
        key = repr(req.get("init"))
        if key != st.init_key:
            init = req["init"]
            torch.manual_seed(init["seed"])
            st.instance = st.entry(*init["args"])
            if isinstance(st.instance, torch.nn.Module):
                st.instance = st.instance.to(dev)
            st.init_key = key
        fn = st.instance
    else:
        fn = st.entry
    inputs = [_to_device(t, dev) for t in req["inputs"]]
    before = [_digest(t) for t in inputs]
    threads_before = threading.active_count()
    t0 = _perf_counter()
    with torch.no_grad():
        out = fn(*inputs)
    if dev == "cuda":
        torch.cuda.synchronize()
    call_s = _perf_counter() - t0
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    meta, payload = [], []
    for o in outs:
        is_tensor = isinstance(o, torch.Tensor)
        m: dict[str, Any] = {"type": f"{type(o).__module__}.{type(o).__qualname__}", "exact": type(o) is torch.Tensor}
        if is_tensor:
            m.update(dtype=str(o.dtype).removeprefix("torch."), shape=list(o.shape), stride=list(o.stride()),
                     device=o.device.type, aliases=[i for i, t in enumerate(inputs) if _shares(o, t)])
            payload.append(o.detach() if type(o) is torch.Tensor else _plain(o))
        else:
            payload.append(None)
        meta.append(m)
    mutated = [i for i, (t, h) in enumerate(zip(inputs, before)) if _digest(t) != h]
    return {"ok": True, "outputs": payload, "meta": meta, "tuple": isinstance(out, (tuple, list)),
            "mutated": mutated, "call_s": call_s, "threads_delta": threading.active_count() - threads_before}


def _plain(o: Any) -> Any:
    import torch

    try:
        return o.detach().as_subclass(torch.Tensor)
    except Exception:
        return None


def _shares(a: Any, b: Any) -> bool:
    import torch

    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    except Exception:
        return False


def _digest(t: Any) -> Any:
    import hashlib

    import torch

    if not isinstance(t, torch.Tensor):
        return repr(t)
    c = t.detach().contiguous().cpu().reshape(-1)
    return hashlib.sha256(c.view(torch.uint8).numpy().tobytes() if c.numel() else b"").hexdigest()


def _tb(e: BaseException, limit: int = 12) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(lines[-limit:])[-4000:]


def main() -> None:
    from assay.sandbox import protocol

    if os.environ.get("ASSAY_NET_GUARD") == "python":
        _guard_network()
    import torch  # noqa: F401  (warm up while the evaluator plans; not counted as build)

    for name in filter(None, os.environ.get("ASSAY_PREIMPORT", "").split(",")):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    st = _State()
    handlers = {"load": _load, "run": _run}
    while True:
        try:
            req = protocol.recv(REQ_FD)
        except protocol.PeerClosed:
            return
        op = req.get("op")
        if op == "exit":
            return
        try:
            resp = handlers[op](st, req)
        except BaseException as e:  # noqa: BLE001 - report, the evaluator decides
            text = f"{type(e).__name__}: {e}"
            resp = {"ok": False, "phase": "run", "error": text[:2000], "traceback": _tb(e),
                    "cuda_error": "CUDA" in text or "cuda" in type(e).__module__,
                    "build": "CompilationError" in text or "Error building extension" in text}
        protocol.send(RESP_FD, resp)
