"""The wire format between the evaluator and a worker: no pickle, ever.

A message is ``<u64 header length><JSON header><buffers...>``. Tensors inside the header
are replaced by ``{"__tensor__": i, "dtype", "size", "stride", "span"}``, and buffer ``i``
holds the ``span`` elements of memory the tensor covers (so strides, transposes, offsets
and stride-0 expansions survive the trip). Decoding on the trusted side only ever runs
``json.loads`` and ``torch.frombuffer``, with every size checked against a cap, so a
hostile worker cannot execute code in, or exhaust the memory of, the evaluator.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# torch is imported where it is used, not here: the evaluator starts its worker (process.py
# imports this module) before it imports torch itself, so both imports run at the same time.

_LEN = struct.Struct("<Q")


class ProtocolError(Exception):
    """The peer sent something malformed, too large, or nothing in time."""


class PeerTimeout(ProtocolError):
    pass


class PeerClosed(ProtocolError):
    pass


def _span(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(size, stride))


def encode(obj: Any) -> tuple[bytes, list[memoryview]]:
    import torch

    buffers: list[memoryview] = []

    def enc(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            t = x.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            size, stride = tuple(t.shape), tuple(t.stride())
            offset = t.storage_offset()
            span = _span(size, stride) + offset if t.numel() else 0
            flat = torch.as_strided(t, (span,), (1,), 0).contiguous() if span else t.new_empty(0)
            raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
            buffers.append(memoryview(raw.numpy()).cast("B"))
            return {"__tensor__": len(buffers) - 1, "dtype": str(t.dtype).removeprefix("torch."),
                    "size": list(size), "stride": list(stride), "offset": offset, "span": span}
        if isinstance(x, dict):
            return {str(k): enc(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [enc(v) for v in x]
        if isinstance(x, float) and not math.isfinite(x):
            return {"__float__": repr(x)}
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        return {"__repr__": repr(x)[:200], "__type__": type(x).__qualname__}

    header = enc(obj)
    meta = {"body": header, "buffers": [b.nbytes for b in buffers]}
    return json.dumps(meta).encode(), buffers


def decode(header: bytes, buffers: list[bytes]) -> Any:
    """Decode a message; anything malformed (however it fails) is a ``ProtocolError``."""
    try:
        return _decode(header, buffers)
    except ProtocolError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, OverflowError, RuntimeError) as e:
        # RuntimeError covers RecursionError (hostile nesting) and torch's own refusals
        raise ProtocolError(f"malformed message: {type(e).__name__}: {str(e)[:200]}") from None


def _decode(header: bytes, buffers: list[bytes]) -> Any:
    meta = json.loads(header)

    def dec(x: Any) -> Any:
        if isinstance(x, dict):
            if "__tensor__" in x:
                return _tensor(x, buffers)
            if "__float__" in x:
                return float(x["__float__"])
            return {k: dec(v) for k, v in x.items()}
        if isinstance(x, list):
            return [dec(v) for v in x]
        return x

    return dec(meta["body"])


@lru_cache(maxsize=1)
def _dtypes() -> dict[str, "torch.dtype"]:
    import torch

    return {str(d).removeprefix("torch."): d for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
        torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def _tensor(x: dict[str, Any], buffers: list[bytes]) -> "torch.Tensor":
    import torch

    try:
        dtype = _dtypes()[x["dtype"]]
        size = tuple(int(s) for s in x["size"])
        stride = tuple(int(s) for s in x["stride"])
        span = int(x["span"])
        offset = int(x.get("offset", 0))
        raw = buffers[int(x["__tensor__"])]
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise ProtocolError(f"malformed tensor record: {e}") from None
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if len(size) != len(stride) or any(s < 0 for s in size + stride) or len(raw) != span * itemsize:
        raise ProtocolError("tensor record does not match its buffer")
    covered = _span(size, stride)
    # span 0 only for an empty tensor: otherwise torch.empty(size) would allocate what the peer asks
    if offset < 0 or span != (covered + offset if covered else 0):
        raise ProtocolError("tensor record span is inconsistent")
    if dtype is torch.bool:  # only 0/1 are valid bools: normalise whatever bytes the peer sent
        base = torch.frombuffer(bytearray(raw), dtype=torch.uint8).ne(0) if span else torch.empty(0, dtype=dtype)
    else:
        base = torch.frombuffer(bytearray(raw), dtype=dtype) if span else torch.empty(0, dtype=dtype)
    return torch.as_strided(base, size, stride, offset) if span else torch.empty(size, dtype=dtype)


def send(fd: int, obj: Any) -> None:
    header, buffers = encode(obj)
    _write_all(fd, _LEN.pack(len(header)) + header)
    for b in buffers:
        _write_all(fd, b)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def recv(fd: int, timeout: float | None = None, max_bytes: int = 1 << 34) -> Any:
    deadline = None if timeout is None else time.monotonic() + timeout
    (hlen,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    if hlen > 64 << 20:
        raise ProtocolError(f"header of {hlen} bytes exceeds the cap")
    header = _read_exact(fd, hlen, deadline)
    try:
        sizes = json.loads(header)["buffers"]
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise ProtocolError(f"malformed header: {str(e)[:200]}") from None
    if not (isinstance(sizes, list) and all(type(s) is int and s >= 0 for s in sizes)):
        raise ProtocolError("malformed header: buffers is not a list of sizes")
    if sum(sizes) > max_bytes:
        raise ProtocolError(f"message of {sum(sizes)} bytes exceeds the cap of {max_bytes}")
    buffers = [_read_exact(fd, s, deadline) for s in sizes]
    return decode(header, buffers)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    out = bytearray()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerTimeout("timed out waiting for the worker")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise PeerTimeout("timed out waiting for the worker")
        chunk = os.read(fd, min(n - len(out), 1 << 22))
        if not chunk:
            raise PeerClosed("the worker closed its channel")
        out += chunk
    return bytes(out)
