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


_ORIG: dict[str, Any] = {}


def _capture_originals() -> None:
    """Identities of the timing functions, taken before the candidate is imported."""
    import torch

    from assay.measure import timing

    _ORIG.update(Event=torch.cuda.Event, synchronize=torch.cuda.synchronize, cold_samples=timing.cold_samples)


class _State:
    def __init__(self) -> None:
        self.module: Any = None
        self.entry: Any = None
        self.is_class = False
        self.instance: Any = None
        self.init_key: str | None = None
        self.device = "cpu"
        self.fn: Any = None
        self.sets: list[Any] = []
        self.flusher: Any = None
        self.landlock = ""
        self.l2_reset = ""
        self.block_s = 0.0


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
    return {"ok": True, "import_s": _perf_counter() - t0, "is_class": st.is_class, "landlock": st.landlock}


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
    fn = _callable(st, req.get("init"))
    inputs = [_to_device(t, dev) for t in req["inputs"]]
    if dev == "cuda" and req.get("poison", True):
        _poison_allocator(inputs)
    before = [_digest(t) for t in inputs]
    threads_before = threading.active_count()
    t0 = _perf_counter()
    with torch.no_grad():
        out = fn(*inputs)
    pending: list[int] = []
    if dev == "cuda":
        # read the outputs after only the caller's stream is done, then again after a device-wide
        # synchronize: a difference means work was left running on another stream
        torch.cuda.current_stream().synchronize()
        early = [_digest(o) for o in (list(out) if isinstance(out, (tuple, list)) else [out])]
        torch.cuda.synchronize()
        late = [_digest(o) for o in (list(out) if isinstance(out, (tuple, list)) else [out])]
        pending = [i for i, (a, b) in enumerate(zip(early, late)) if a != b]
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
    changed: list[int] = []
    if req.get("stability"):  # outputs re-read after a delay and a later sync must not change
        snap = [_digest(p) for p in payload]
        time.sleep(0.05)
        if dev == "cuda":
            torch.cuda.synchronize()
        changed = [i for i, (p, h) in enumerate(zip(payload, snap)) if _digest(p) != h]
    payload = [p.clone() if isinstance(p, torch.Tensor) else p for p in payload] if changed else payload
    return {"ok": True, "outputs": payload, "meta": meta, "tuple": isinstance(out, (tuple, list)),
            "mutated": mutated, "call_s": call_s, "threads_delta": threading.active_count() - threads_before,
            "changed_after_return": changed + [i for i in pending if i not in changed]}


def _plain(o: Any) -> Any:
    import torch

    try:
        return o.detach().as_subclass(torch.Tensor)
    except Exception:
        return None


def _callable(st: _State, init: Any) -> Any:
    import torch

    if not st.is_class:
        return st.entry
    key = repr(init)
    if key != st.init_key:
        torch.manual_seed(init["seed"])
        st.instance = st.entry(*init["args"])
        if isinstance(st.instance, torch.nn.Module):
            st.instance = st.instance.to(st.device)
        st.init_key = key
    return st.instance


def _poison_allocator(inputs: list[Any]) -> None:
    """Fill memory the caching allocator will hand out next with NaN, so an output element a
    kernel never writes shows up as NaN instead of plausible stale data."""
    import torch

    nbytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    blocks = [torch.full((max(nbytes // 4, 1) + 1024,), float("nan"), device="cuda") for _ in range(2)]
    del blocks


def _trace(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    """The aten operations one call executes (what actually ran, not what the source says)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: list[str] = []

    class _Rec(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # no torch._dynamo.disable wrapper (it imports dynamo, ~2 s)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            ops.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))

    fn = _callable(st, req.get("init"))
    inputs = [_to_device(t, st.device) for t in req["inputs"]]
    with torch.no_grad(), _Rec():
        fn(*inputs)
    return {"ok": True, "ops": ops}


def _stage(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    st.fn = _callable(st, req.get("init"))
    st.sets = [[_to_device(t, st.device) for t in s] for s in req["sets"]]
    return {"ok": True, "n": len(st.sets)}


def _tampered() -> list[str]:
    import torch

    from assay.measure import timing

    found = [name for name, now, then in (
        ("time.perf_counter", time.perf_counter, _perf_counter),
        ("assay timing clock", timing._perf_counter, _perf_counter),
        ("torch.cuda.Event", torch.cuda.Event, _ORIG.get("Event")),
        ("torch.cuda.synchronize", torch.cuda.synchronize, _ORIG.get("synchronize")),
        ("timing.cold_samples", timing.cold_samples, _ORIG.get("cold_samples")),
    ) if then is not None and now is not then]
    return found


def _time(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    import torch

    from assay.measure import timing

    mode = str(req.get("flush") or "write")
    if st.flusher is None or st.flusher.mode != mode:
        st.flusher = timing.Flusher(st.device, mode)
    with torch.no_grad():
        refresh = req.get("refresh")
        if refresh:  # fresh values written into the same memory: a cache keyed on pointers goes stale
            target = st.sets[int(refresh["index"])]
            for i, off, vals in refresh["chunks"]:
                target[int(i)].view(-1)[int(off):int(off) + vals.numel()] = vals.to(target[int(i)].device)
        if st.device == "cuda" and not st.l2_reset:
            st.l2_reset = timing.reset_persisting_l2()
        if req.get("calibrate"):
            st.block_s = timing.block_for(st.fn, st.sets, st.device)
        with timing.cpu_threads(int(req.get("threads") or 0)):  # the stage sends threads on the CPU only
            times, escapes, out = timing.cold_samples(st.fn, st.sets, int(req["n"]), st.device, st.flusher,
                                                      start_index=int(req.get("start", 0)), block_s=st.block_s)
        # the empty call's round trip measured now, under the same conditions as this round's samples
        null_now = timing.null_escapes(st.device, n=10) if st.device == "cuda" else (0.0, 0.0)
    resp = {"ok": True, "times": times, "escapes": escapes, "tampered": _tampered(), "l2_reset": st.l2_reset,
            "null_escape": list(null_now), "block_s": st.block_s}
    sample = req.get("sample")
    if sample is not None:  # the outputs (or a seeded sample of their elements) for the re-check
        resp["output"] = [o if o is None else timing.sample(o, int(sample["k"]), int(sample["seed"]))
                          for o in _outputs_plain(out)]
    return resp


def _probe(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    import torch

    from assay.measure import timing

    with torch.no_grad():
        hot, note = timing.hot_time(st.fn, st.sets[0])
        if req.get("what") == "hot":
            return {"ok": True, "hot_s": hot, "hot_note": note}
        kernel_s, kernels = timing.profiled_kernel_time(st.fn, st.sets[0])
    return {"ok": True, "hot_s": hot, "hot_note": note, "kernel_s": kernel_s, "kernels": kernels}


def _profile_call(st: _State, req: dict[str, Any]) -> dict[str, Any]:
    """Warm up, then one call between cudaProfilerStart/Stop: what ``ncu --profile-from-start off``
    (the profile stage's launcher) records."""
    import torch

    with torch.no_grad():
        for _ in range(int(req.get("warmup", 3))):
            st.fn(*st.sets[0])
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        st.fn(*st.sets[0])
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return {"ok": True}


def _outputs_plain(out: Any) -> Any:
    import torch

    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.detach() if type(o) is torch.Tensor else None for o in outs]


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
    writable = [p for p in os.environ.get("ASSAY_WRITABLE", "").split(os.pathsep) if p]
    if writable:
        from assay.sandbox.landlock import restrict_writes

        st_landlock = restrict_writes(writable)
    else:
        st_landlock = "not requested"
    st.landlock = st_landlock
    _capture_originals()
    handlers = {"load": _load, "run": _run, "stage": _stage, "time": _time, "probe": _probe,
                "profile_call": _profile_call,
                "trace": _trace}
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
