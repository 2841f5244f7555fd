"""Roofline floors: the least time the hardware allows for a kernel's work.

* Work: ``count_flops`` runs the function once under
  ``torch.utils.flop_counter.FlopCounterMode`` and returns the flops of the ops
  that have a registered formula (matmul, conv, attention, ...). Every other op
  counts 0 -- in particular elementwise ops and reductions, which are treated as
  memory-bound: their floor is the byte term alone. ``min_bytes`` is the
  compulsory traffic: every tensor input read once and every output written
  once, each tensor counted by the unique storage it spans (so an expanded,
  stride-0 input costs its storage, not its broadcast numel).
* Ceilings: ``measure_ceilings`` measures, on the actual device, a copy
  bandwidth (bytes read + bytes written per second of a large device-to-device
  copy, at least 4x the L2 cache so it is a DRAM number) and the matmul rate
  per dtype (2 n^3 / time, fp32 with TF32 off). These are achievable rates,
  not datasheet peaks.
* Floor: ``floor_time`` = max(bytes / copy_bandwidth, flops / matmul rate of the
  dtype); the fp32 rate stands in for dtypes that were not measured, except
  dtypes narrower than 16 bits (fp8, int8, ...), whose tensor-core rate can be
  far above any measured one: for those the compute term is left out, so the
  floor stays a lower bound.
* Plausibility: a measured time more than ``tolerance`` below the floor is
  rejected as faster than the hardware allows (a skipped computation, a timing
  bug, or work done outside the timed region). Caveat: the bandwidth ceiling
  is a DRAM ceiling, so the check presumes the timer flushes the L2 cache
  between runs; inputs that stay L2-resident (``Ceilings.l2_bytes``) can beat it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

GiB = 2**30
MiB = 2**20
MATMUL_DTYPES_CUDA = (torch.bfloat16, torch.float16, torch.float32)
_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32",
            "fp64": "float64", "double": "float64"}


# ----------------------------------------------------------------------------- work


def _unwrap_dynamo_disable() -> None:
    """torch wraps the FLOP counter's dispatch mode in ``torch._dynamo.disable`` when the class is
    defined, and the wrapper imports ``torch._dynamo`` (~2 s) on the first counted op; dynamo runs
    frames eagerly under a dispatch mode anyway. This undoes it whatever the import order (the
    wrapper keeps ``__wrapped__``); assay's own dispatch modes opt out with ``_should_skip_dynamo``."""
    from torch.utils import flop_counter

    inner = getattr(flop_counter, "_FlopCounterMode", None)
    raw = getattr((inner.__dict__ if inner is not None else {}).get("__torch_dispatch__"), "__wrapped__", None)
    if inner is not None and raw is not None:
        inner.__torch_dispatch__ = raw


def count_flops(fn: Callable[..., Any], inputs: Sequence[Any]) -> int:
    """Flops of ``fn(*inputs)`` (runs it once, without autograd); 0 for ops with no formula."""
    _unwrap_dynamo_disable()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn(*inputs)
    return int(counter.get_total_flops())


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of storage that ``t`` addresses: min(memory span, numel over non-broadcast dims)."""
    if t.numel() == 0:
        return 0
    span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    distinct = math.prod(size for size, stride in zip(t.shape, t.stride()) if stride != 0)
    return min(span, distinct) * t.element_size()


def min_bytes(inputs: Any, outputs: Any) -> int:
    """Compulsory traffic: each tensor in ``inputs`` read once plus each in ``outputs`` written once.

    Both may be a tensor or nested lists/tuples/dicts; non-tensors are ignored. The
    same view passed twice on one side counts once.
    """
    return _side_bytes(inputs) + _side_bytes(outputs)


def _side_bytes(tree: Any) -> int:
    seen: set[tuple[Any, ...]] = set()
    total = 0
    for t in _tensors(tree):
        key = (t.device, t.data_ptr(), t.dtype, tuple(t.shape), t.stride())
        if key not in seen:
            seen.add(key)
            total += tensor_bytes(t)
    return total


def _tensors(tree: Any) -> Iterator[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, Mapping):
        for v in tree.values():
            yield from _tensors(v)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _tensors(v)


# ----------------------------------------------------------------------------- ceilings


@dataclass
class Ceilings:
    device: str
    copy_bandwidth: float  # bytes/s, (read + write bytes) / time
    matmul_flops: dict[str, float] = field(default_factory=dict)  # dtype name -> flop/s
    torch_version: str = ""
    l2_bytes: int = 0  # 0 when unknown

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Ceilings:
        d = json.loads(text)
        return cls(device=str(d["device"]), copy_bandwidth=float(d["copy_bandwidth"]),
                   matmul_flops={str(k): float(v) for k, v in d.get("matmul_flops", {}).items()},
                   torch_version=str(d.get("torch_version", "")), l2_bytes=int(d.get("l2_bytes", 0)))


def device_name(device: str | torch.device) -> str:
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(_cuda_index(dev))
    return f"cpu: {_cpu_model()}"


def measure_ceilings(
    device: str | torch.device,
    *,
    copy_bytes: int | None = None,
    matmul_n: int | None = None,
    reps: int | None = None,
    warmup: int = 3,
) -> Ceilings:
    """Measure copy bandwidth and matmul rates on ``device``.

    CUDA defaults: copy of max(1 GiB, 4x L2) bytes, 8192^3 matmuls in bf16/fp16/fp32
    (TF32 off), median of 20 event-timed runs after ``warmup``. CPU defaults:
    ``dst.copy_(src)`` of 256 MiB and a float32 2048^3 matmul, median of 5
    ``time.perf_counter`` runs. Smaller sizes are for tests.
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        return _measure_cuda(dev, copy_bytes, matmul_n or 8192, reps or 20, warmup)
    if dev.type == "cpu":
        return _measure_cpu(copy_bytes or 256 * MiB, matmul_n or 2048, reps or 5, warmup)
    raise ValueError(f"unsupported device {dev}")


def _measure_cpu(copy_bytes: int, n: int, reps: int, warmup: int) -> Ceilings:
    src = torch.ones(max(1, copy_bytes // 4), dtype=torch.float32)
    dst = torch.empty_like(src)
    t_copy = _median_wall(lambda: dst.copy_(src), reps, warmup)
    a, b = torch.randn(n, n), torch.randn(n, n)
    t_mm = _median_wall(lambda: torch.mm(a, b), reps, warmup)
    return Ceilings(device=device_name("cpu"), copy_bandwidth=2 * src.numel() * 4 / t_copy,
                    matmul_flops={"float32": 2 * n**3 / t_mm}, torch_version=torch.__version__)


def _median_wall(fn: Callable[[], object], reps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _measure_cuda(dev: torch.device, copy_bytes: int | None, n: int, reps: int, warmup: int) -> Ceilings:
    idx = _cuda_index(dev)
    dev = torch.device("cuda", idx)
    l2 = int(getattr(torch.cuda.get_device_properties(idx), "L2_cache_size", 0))
    nbytes = copy_bytes or max(GiB, 4 * l2)
    with torch.cuda.device(idx):
        src = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
        dst = torch.empty_like(src)
        t_copy = _median_cuda(lambda: dst.copy_(src), reps, warmup)
        del src, dst
        rates: dict[str, float] = {}
        with _tf32_off():
            for dtype in MATMUL_DTYPES_CUDA:
                a = torch.randn(n, n, device=dev, dtype=dtype)
                b = torch.randn(n, n, device=dev, dtype=dtype)
                rates[normalize_dtype_name(dtype)] = 2 * n**3 / _median_cuda(lambda: torch.mm(a, b), reps, warmup)
                del a, b
        torch.cuda.empty_cache()
    return Ceilings(device=device_name(dev), copy_bandwidth=2 * (nbytes // 4) * 4 / t_copy,
                    matmul_flops=rates, torch_version=torch.__version__, l2_bytes=l2)


def _median_cuda(fn: Callable[[], object], reps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
              for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return float(statistics.median(s.elapsed_time(e) for s, e in events)) / 1e3


@contextlib.contextmanager
def _tf32_off() -> Iterator[None]:
    """TF32 off for cuBLAS fp32 matmuls; restores both the legacy and the new setting."""
    m = torch.backends.cuda.matmul
    old_precision = m.fp32_precision
    try:
        old_allow: bool | None = m.allow_tf32
    except RuntimeError:  # the new API was used: the legacy getter refuses to answer
        old_allow = None
    m.allow_tf32 = False
    try:
        yield
    finally:
        if old_allow is not None:
            m.allow_tf32 = old_allow
        if m.fp32_precision != old_precision:
            m.fp32_precision = old_precision


def load_or_measure(
    device: str | torch.device,
    cache_path: str | os.PathLike[str],
    measure: Callable[[str | torch.device], Ceilings] = measure_ceilings,
) -> Ceilings:
    """Ceilings from the JSON cache at ``cache_path``, keyed by device name + torch
    version; measured (and added to the cache) when missing or unreadable."""
    path = Path(cache_path)
    key = f"{device_name(device)} | torch {torch.__version__}"
    cache = _read_cache(path)
    if key in cache:
        try:
            return Ceilings.from_json(json.dumps(cache[key]))
        except (KeyError, TypeError, ValueError):
            pass
    ceilings = measure(device)
    cache[key] = json.loads(ceilings.to_json())
    _write_atomic(path, json.dumps(cache, indent=2, sort_keys=True))
    return ceilings


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _cuda_index(dev: torch.device) -> int:
    return dev.index if dev.index is not None else torch.cuda.current_device()


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


# ----------------------------------------------------------------------------- floor


def normalize_dtype_name(dtype: str | torch.dtype) -> str:
    """'bfloat16' for torch.bfloat16, 'torch.bfloat16', 'bf16'; likewise for the others."""
    name = str(dtype).removeprefix("torch.")
    return _ALIASES.get(name, name)


def _itemsize(name: str) -> int | None:
    dt = getattr(torch, name, None)
    return dt.itemsize if isinstance(dt, torch.dtype) else None


def floor_time(flops: float, bytes_: float, ceilings: Ceilings, dtype_name: str | torch.dtype) -> float:
    """max(bytes / copy bandwidth, flops / matmul rate for the dtype), seconds."""
    if flops < 0 or bytes_ < 0:
        raise ValueError("flops and bytes must be >= 0")
    memory = bytes_ / ceilings.copy_bandwidth
    name = normalize_dtype_name(dtype_name)
    rate = ceilings.matmul_flops.get(name)
    if rate is None:
        size = _itemsize(name)
        narrow = size is not None and size < 2
        rate = None if narrow else ceilings.matmul_flops.get("float32")
    compute = flops / rate if rate else 0.0
    return max(memory, compute)


def roofline_fraction(floor_s: float, measured_s: float) -> float:
    """floor / measured: 1.0 is at the roofline, 0.1 is 10x off it."""
    if measured_s <= 0:
        raise ValueError(f"measured time must be > 0, got {measured_s}")
    return floor_s / measured_s


def plausibility(floor_s: float, measured_s: float, tolerance: float = 0.1) -> tuple[bool, str]:
    """Reject a measured time below floor * (1 - tolerance)."""
    if measured_s <= 0:
        return False, f"implausible: measured time {measured_s:.3g} s is not positive"
    if measured_s < floor_s * (1.0 - tolerance):
        return False, (f"implausible: faster than the hardware allows (measured {measured_s:.3g} s, "
                       f"roofline floor {floor_s:.3g} s, {floor_s / measured_s:.2f}x the floor)")
    return True, f"measured {measured_s:.3g} s, {roofline_fraction(floor_s, measured_s):.1%} of the roofline floor {floor_s:.3g} s"
